#!/bin/sh
# doc-lines.sh - the docs' examples name real lines: every
# `desync_scenario.c:N` in README.md and docs/*.md (the post-mortem's
# title, the desync reports, the time table, ...) is a line of
# tests/desync/desync_scenario.c that makes the collective call an example
# shows (an MPI_ call, or the iteration_call it is inlined from), so that an
# edit of the scenario that moves its calls shows up here, not as a README
# naming a line that holds something else (it said desync_scenario.c:208,
# a compute helper's line, after the call had moved to 214).
. "$top_srcdir/tests/tap.sh"
SRC="$top_srcdir/tests/desync/desync_scenario.c"
[ -f "$SRC" ] || tap_skip_all "no tests/desync/desync_scenario.c"
tap_plan 2
D=$CCS_TMP
# "FILE:LINE N" for every mention (FILE relative to the source tree).
(cd "$top_srcdir" && grep -on 'desync_scenario\.c:[0-9][0-9]*' README.md docs/*.md) |
    sed 's/^\([^:]*\):\([0-9]*\):desync_scenario\.c:\([0-9]*\)$/\1:\2 \3/' > "$D/mentions"
tap_check "the docs name desync_scenario.c lines (the examples this test guards are there)" test -s "$D/mentions"
bad=$(while read -r where n; do
    sed -n "${n}p" "$SRC" | grep -Eq '(^|[^A-Za-z_])(MPI_[A-Z][a-z_]*|iteration_call) *\(' || echo "$where names line $n: $(sed -n "${n}p" "$SRC" | sed 's/^ *//')"
done < "$D/mentions")
tap_eq "every desync_scenario.c:N names a line with a collective call" "" "$bad"
tap_done
