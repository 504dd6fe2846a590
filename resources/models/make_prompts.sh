#!/bin/sh
# Held-out prompts for the bundled pair: the first six words of two verses
# from each block of corpus lines that training holds out (lines i with
# (i / 100) % 20 == 19, as core/train/token_corpus.cpp splits a corpus of
# this size).
#   resources/models/make_prompts.sh /tmp/kjv.txt > resources/models/heldout_prompts.txt
set -eu
awk '{ i = NR - 1 }
  int(i / 100) % 20 == 19 && (i % 100 == 10 || i % 100 == 60) && NF >= 8 {
    print $1, $2, $3, $4, $5, $6
  }' "$1"
