#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs every test through CTest,
# then the hostile-input checks under AddressSanitizer + UBSan (cmake/sanitize.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build"
"$here/cmake/setup.sh" "$build"
# ctest runs tests side by side; one libtorch thread each avoids oversubscribing
# the cores (the programs otherwise use every core: core/decode/threads.h).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
status=0
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900 || status=$?
# The torch-free parser tests and the fuzz regression corpus, built
# again with ASan+UBSan in build-asan (about 6 minutes from cold, seconds when
# nothing changed). Runs even when ctest failed, so one CI run reports both.
"$here/cmake/sanitize.sh" "$here/build-asan" || status=$?
exit "$status"
