#!/usr/bin/env bash
# Installs node-llama-cpp, pinned in interop/llamacpp/package-lock.json, for
# the llama.cpp interop tests and bench (docs/llamacpp.md): its prebuilt CPU build of
# llama.cpp only (--omit=optional drops the CUDA and Vulkan builds; the
# linux-x64 build is a direct dependency), no install scripts (they would
# download or compile llama.cpp). Never fails the set-up: without npm, Node.js
# 20 or the registry it prints why and the tests that need it report skipped.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$here/interop/llamacpp"

skip() { echo "llama.cpp interop not installed: $1 (the llamacpp_* tests will report skipped)"; exit 0; }

command -v node >/dev/null 2>&1 || skip "node not found"
command -v npm >/dev/null 2>&1 || skip "npm not found"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 20 ] || skip "node-llama-cpp 3.21.1 needs Node.js 20 or newer, this is $(node --version)"
[ "$(uname -m)" = x86_64 ] && [ "$(uname -s)" = Linux ] || skip "the pinned prebuilt llama.cpp is for Linux x86-64"

stamp="$dir/node_modules/.kvscope-lock.sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "node-llama-cpp: already installed in interop/llamacpp"
  exit 0
fi
if (cd "$dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error); then
  echo "$want" > "$stamp"
  echo "node-llama-cpp: installed in interop/llamacpp"
else
  skip "npm ci failed"
fi
