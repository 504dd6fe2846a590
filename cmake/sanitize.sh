#!/usr/bin/env bash
# Builds the torch-free parser tests and the fuzz regression replays with
# AddressSanitizer + UndefinedBehaviorSanitizer (-DKVSCOPE_SANITIZE=ON, gcc is
# fine) in build-asan, and runs them. Usage: cmake/sanitize.sh [build-dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-asan}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSCOPE_SANITIZE=ON -DKVSCOPE_BUILD_UI=OFF
targets=(kvscope_base_tests)
for h in safetensors config tokenizer_json tokenizer_encode trace_metadata capture gguf; do targets+=("fuzz_replay_$h"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
"$build/tests/kvscope_base_tests" --gtest_brief=1
# capture_check links libtorch: its replay needs the whole core instrumented
# (about 30 min on 2 cores), which this script does not build.
ctest --test-dir "$build" --output-on-failure -R '^fuzz_regression_' -E '^fuzz_regression_capture_check$'
