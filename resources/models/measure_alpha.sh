#!/bin/sh
# Greedy acceptance rate alpha of the bundled target with a drafter (the
# bundled drafter unless a directory is given) at gamma 4 over the held-out
# prompts, measured by the speculative engine (kvscope-cli run):
# alpha = sum of accepted drafts / sum of drafted tokens over all prompts.
#   resources/models/measure_alpha.sh build/app/kvscope-cli [max-new] [drafter-dir]
set -eu
cli="$1"
max_new="${2:-48}"
here="$(cd "$(dirname "$0")" && pwd)"
drafter="${3:-$here/drafter}"
[ -d "$drafter" ] || { echo "measure_alpha.sh: drafter directory $drafter does not exist" >&2; exit 1; }
while IFS= read -r prompt; do
  [ -n "$prompt" ] || continue
  "$cli" run --target "$here/target" --drafter "$drafter" --prompt "$prompt" --gamma 4 --greedy \
    --max-new "$max_new" --ignore-eos --no-baseline --json | tail -n 1
done < "$here/heldout_prompts.txt" | awk '
  {
    match($0, /"accepted":[0-9]+/); accepted = substr($0, RSTART + 11, RLENGTH - 11)
    match($0, /"drafted":[0-9]+/); drafted = substr($0, RSTART + 10, RLENGTH - 10)
    total_accepted += accepted; total_drafted += drafted; prompts++
    printf "prompt %2d: alpha %.3f (%d/%d)\n", prompts, accepted / drafted, accepted, drafted
  }
  END { printf "alpha %.4f over %d prompts (%d of %d drafts accepted, gamma 4, greedy)\n",
        total_accepted / total_drafted, prompts, total_accepted, total_drafted }'
