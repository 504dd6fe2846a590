#!/bin/sh
# Text for a drafter's distillation stage: the target's greedy continuations
# (64 tokens) of prompts taken from the training split (first six words of
# lines i with i % 100 in RESIDUES outside the held-out blocks), followed by
# the first 400 KB of the corpus (its first line dropped). Greedy speculative
# decoding runs the drafter on the target's own greedy text, so that is what
# it should learn to predict.
# RESIDUES defaults to "30 80" (587 prompts: the bundled drafter's stage 3);
# more residues give more prompts, e.g. "10 30 50 70 80 90" for 1,748.
# Held-out blocks (every 20th block of 100 lines, as make_prompts.sh and
# core/train/token_corpus.cpp) are never used whatever the residues.
#   resources/models/make_distill_corpus.sh build/app/kvscope-cli /tmp/target /tmp/kjv.txt ["30 80"] > /tmp/distill.txt
set -eu
cli="$1"; target="$2"; corpus="$3"; residues="${4:-30 80}"
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
awk -v residues="$residues" '
  BEGIN { n = split(residues, list, " "); for (k = 1; k <= n; k++) wanted[list[k] + 0] = 1 }
  { i = NR - 1 }
  int(i / 100) % 20 != 19 && ((i % 100) in wanted) && NF >= 8 {
    print $1, $2, $3, $4, $5, $6
  }' "$corpus" > "$prompts"
"$cli" generate --model "$target" --prompts "$prompts" --max-new 64 --greedy --ignore-eos
head -c 400000 "$corpus" | awk 'NR > 1'
