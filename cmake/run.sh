#!/usr/bin/env bash
# Installs what is missing, builds (Release) and runs kvscope: the GUI with the
# bundled models when a display is available, otherwise a CLI demo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build"
"$here/cmake/setup.sh" "$build"

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$build/app/kvscope" ]; then
  exec "$build/app/kvscope"
fi
exec "$here/cmake/demo.sh" "$build"
