#!/usr/bin/env bash
# Runs one libFuzzer harness with seeds from tests/fixtures.
# Usage: fuzz/run.sh NAME [SECONDS] [extra libFuzzer flags...]
#   NAME: safetensors | config | tokenizer_json | tokenizer_encode | trace_metadata | capture | capture_check | gguf
#   (capture_check links libtorch: its first build instruments the whole core, ~30 min on 2 cores)
# Installs clang and compiler-rt when missing (cmake/fuzz-deps.txt), builds
# build-fuzz (clang, -DKVSCOPE_FUZZ=ON) with KVSCOPE_JOBS jobs (default: every
# core). One process: prefix `nice -n 10` on a shared machine. The corpus grows
# in build-fuzz/corpus/NAME; crashes land in build-fuzz/crashes/NAME. Copy every
# crash into fuzz/regression/NAME/ once fixed: ctest replays that directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:?usage: fuzz/run.sh NAME [SECONDS]}"
seconds="${2:-600}"
shift $(( $# > 1 ? 2 : 1 ))
build="$here/build-fuzz"
"$here/cmake/install-deps.sh" "$here/cmake/fuzz-deps.txt"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DKVSCOPE_FUZZ=ON -DKVSCOPE_BUILD_UI=OFF -DKVSCOPE_BUILD_TESTS=OFF
fi
cmake --build "$build" -j "${KVSCOPE_JOBS:-$(nproc)}" --target "fuzz_$name"

corpus="$build/corpus/$name"
seeds="$build/seeds/$name"
crashes="$build/crashes/$name"
mkdir -p "$corpus" "$seeds" "$crashes"
fixtures="$here/tests/fixtures"
case "$name" in
  safetensors)      for f in "$fixtures"/models/*/model.safetensors; do
                      head -c 65536 "$f" > "$seeds/$(basename "$(dirname "$f")")"; done
                    max_len=65536 ;;
  config)           for f in "$fixtures"/models/*/config.json; do cp "$f" "$seeds/$(basename "$(dirname "$f")")"; done
                    max_len=8192 ;;
  tokenizer_json)   for f in "$fixtures"/tokenizers/*/tokenizer.json "$fixtures"/models/*/tokenizer.json; do
                      cp "$f" "$seeds/$(basename "$(dirname "$f")")"; done
                    max_len=1048576 ;;
  tokenizer_encode) printf '\0Hello world' > "$seeds/hello"; printf '\1 caf\xc3\xa9 \xf0\x9f\x98\x80' > "$seeds/utf8"
                    max_len=4096 ;;
  trace_metadata)   printf '{"events":[],"rounds":[],"ledger":[]}' > "$seeds/empty"
                    max_len=65536 ;;
  capture)          cp "$fixtures"/captures/*.kvcapture "$seeds/"
                    max_len=65536 ;;
  capture_check)    cp "$fixtures"/captures/*.kvcapture "$seeds/"
                    # the capture corpus too: what open accepts goes on to the check
                    cp "$here"/fuzz/regression/capture/* "$seeds/"
                    max_len=65536 ;;
  gguf)             # What kvscope's exporter writes for three fixture models, made by the
                    # normal build's kvscope-cli (KVSCOPE_CLI) when there is one; the
                    # regression corpus (a small valid GGUF among its files) seeds it always.
                    cli="${KVSCOPE_CLI:-$here/build/app/kvscope-cli}"
                    if [ -x "$cli" ]; then
                      for m in llama-tiny-draft qwen2-tiny gpt2-tiny; do
                        "$cli" export-gguf --model "$fixtures/models/$m" --out "$seeds/$m.gguf" --dtype f16 > /dev/null
                      done
                    else
                      echo "fuzz/run.sh: no kvscope-cli at $cli; seeding from fuzz/regression/gguf only" >&2
                    fi
                    max_len=1048576 ;;
  *) echo "unknown harness $name" >&2; exit 2 ;;
esac
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
"$build/fuzz/fuzz_$name" "$corpus" "$seeds" "$here/fuzz/regression/$name" \
  -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -timeout=10 \
  -artifact_prefix="$crashes/" -print_final_stats=1 "$@" || status=$?
echo "fuzz/run.sh $name: corpus $(find "$corpus" -type f | wc -l) files in $corpus;" \
  "$(find "$crashes" -type f | wc -l) crash/leak/timeout files in $crashes"
exit "$status"
