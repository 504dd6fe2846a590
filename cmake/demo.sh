#!/usr/bin/env bash
# The headless demo: one speculative run on the bundled models, then the
# cached-vs-uncached check. Usage: cmake/demo.sh [build-dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cli="${1:-$here/build}/app/kvscope-cli"
models=()
if [ ! -f "$here/resources/models/target/config.json" ]; then
  echo "(no bundled models in resources/models yet: using the test fixture pair, random weights)"
  models=(--target "$here/tests/fixtures/models/llama-tiny" --drafter "$here/tests/fixtures/models/llama-tiny-draft")
fi
echo "== kvscope-cli run: speculative decoding, greedy, gamma 4 =="
"$cli" run "${models[@]}" --prompt "And the LORD spake unto Moses, saying," --gamma 4 --max-new 48 --greedy
# grep reads the whole list (with -q it would stop early and pipefail would see help's SIGPIPE)
if "$cli" help | grep '^  diff' > /dev/null; then
  echo
  echo "== kvscope-cli diff: cached vs uncached, with the 'prune-short' cache bug injected =="
  "$cli" diff "${models[@]}" --prompt "And the LORD spake unto Moses, saying," --gamma 4 --max-new 32 --greedy --fault prune-short \
    || true  # exit 1: the diff found the bug it was given
fi
