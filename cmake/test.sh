#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs every test through CTest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build"
"$here/cmake/setup.sh" "$build"
# ctest runs tests side by side; one libtorch thread each avoids oversubscribing
# the cores (the programs otherwise use every core: core/decode/threads.h).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900
