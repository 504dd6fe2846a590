#!/usr/bin/env bash
# Installs the Debian packages a list file names (one per line, # comments),
# only those missing, as root or through sudo.
# Usage: cmake/install-deps.sh LIST-FILE
set -euo pipefail
list="${1:?usage: cmake/install-deps.sh LIST-FILE}"
mapfile -t wanted < <(grep -v '^\s*#' "$list" | sed '/^\s*$/d')
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ "${#missing[@]}" -gt 0 ] || exit 0
echo "kvscope setup: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
