#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs every test through CTest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build"
"$here/cmake/setup.sh" "$build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900
