#!/usr/bin/env bash
# Installs the Debian packages kvscope needs (only the missing ones), points
# libblas.so.3 at OpenBLAS, and configures + builds the project (Release).
# Usage: cmake/setup.sh [build-dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

"$here/cmake/install-deps.sh" "$here/cmake/debian-deps.txt"
# node-llama-cpp for the llama.cpp interop (skips with a reason when npm is missing)
"$here/cmake/llamacpp-deps.sh"

# libtorch calls whatever libblas.so.3 the alternatives system selects; the
# reference BLAS is 2-35x slower than OpenBLAS for our matrix products.
blas_alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas-openmp | head -n1 || true)
if [ -n "$blas_alt" ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas_alt" >/dev/null
  lapack_alt=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas-openmp | head -n1 || true)
  [ -z "$lapack_alt" ] || $sudo_cmd update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack_alt" >/dev/null
fi

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
