#!/bin/sh
# Builds the training corpus of the bundled models: the King James Version
# of the Bible (public domain), as shipped by Debian's bible-kjv-text and
# printed by the `bible` program of bible-kjv. One verse per line, verse
# references removed, a blank line between chapters.
#   apt-get install bible-kjv bible-kjv-text
#   resources/models/make_corpus.sh > /tmp/kjv.txt
set -eu
if ! command -v bible >/dev/null 2>&1; then
  echo "make_corpus.sh: the 'bible' program is missing: apt-get install bible-kjv bible-kjv-text" >&2
  exit 1
fi
# Lines look like "Ge1:1 In the beginning ..." / "1Co13:4 Charity ...".
bible -f 'Gen1:1-Rev22:21' | awk '
  match($0, /^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ /) {
    ref = substr($0, 1, RLENGTH - 1)
    text = substr($0, RLENGTH + 1)
    split(ref, parts, ":")
    chapter = parts[1]
    if (NR > 1 && chapter != last) print ""
    last = chapter
    print text
    next
  }
  { print "make_corpus.sh: unexpected line: " $0 > "/dev/stderr"; exit 1 }'
