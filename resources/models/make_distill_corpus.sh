#!/bin/sh
# Text for the drafter's last distillation stage: the target's greedy
# continuations (64 tokens) of 587 prompts taken from the training split
# (first six words of lines i with i % 100 in {30, 80} outside the held-out
# blocks), followed by the first 400 KB of the corpus (its first line
# dropped). Greedy speculative decoding runs the drafter on the target's own
# greedy text, so that is what it should learn to predict.
#   resources/models/make_distill_corpus.sh build/app/kvscope-cli /tmp/target /tmp/kjv.txt > /tmp/distill.txt
set -eu
cli="$1"; target="$2"; corpus="$3"
awk '{ i = NR - 1 }
  int(i / 100) % 20 != 19 && (i % 100 == 30 || i % 100 == 80) && NF >= 8 {
    print $1, $2, $3, $4, $5, $6
  }' "$corpus" | while IFS= read -r prompt; do
  "$cli" generate --model "$target" --prompt "$prompt" --max-new 64 --greedy --ignore-eos
done
head -c 400000 "$corpus" | awk 'NR > 1'
