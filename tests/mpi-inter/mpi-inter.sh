#!/bin/sh
# mpi-inter.sh - collectives on intercommunicators (tests/mpi-inter/inter.c:
# every one MPI defines there, blocking and nonblocking, rooted ones with the
# root on either side, on the intercommunicator and on a duplicate of it),
# on 5 ranks split 3+2, 2+3 and 1+4.  A plain run and a run under ccshim
# with CCSHIM_ON_DESYNC=abort both exit 0 (every result checked by the
# program), ccshim reports no verdict, prints exactly the plain run's
# result lines, and each rank's trace holds exactly the records the program
# says the rules give (counts and bytes from arrays as long as the remote
# group: an over-read lands on an inaccessible page and kills the rank).
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
INTER="$top_builddir/tests/mpi-inter/inter"
DUMP="$top_builddir/tests/ccs_trace_dump"
[ -x "$INTER" ] || tap_skip_all "tests/mpi-inter/inter not built"
[ -x "$DUMP" ] || tap_skip_all "ccs_trace_dump not built"
NP=5
SPLITS=${INTER_SPLITS:-3 2 1}
CASES=80 # result lines per rank: 2 communicators x (blocking, nonblocking) x 20
RECORDS=84 # collectives per rank on the intercommunicators: 2 x 2 x 21
n=0
for a in $SPLITS; do n=$((n + 4 + NP)); done
tap_plan "$n"

for a in $SPLITS; do
    b=$((NP - a))
    d="$CCS_TMP/a$a"
    mkdir -p "$d/plain" "$d/shim/trace"
    ccs_mpirun 60 $NP "$INTER" "$a" "$d/plain" > "$d/plain.out" 2> "$d/plain.err"
    prc=$?
    ccs_mpirun 60 $NP env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_TRACE_DIR="$d/shim/trace" CCSHIM_SUMMARY=0 \
        CCSHIM_JOB_ID="inter$a" CCSHIM_ON_DESYNC=abort "$CCSHIM_RUN" --mpi -- "$INTER" "$a" "$d/shim" \
        > "$d/shim.out" 2> "$d/shim.err"
    src=$?
    tap_eq "$a+$b: the plain run exits 0 (every result as computed)" 0 "$prc"
    [ "$prc" = 0 ] || head -5 "$d/plain.err" | tap_diag
    tap_eq "$a+$b: under ccshim with --on-desync abort it exits 0" 0 "$src"
    [ "$src" = 0 ] || grep -v '^\[' "$d/shim.err" | head -5 | tap_diag
    verdicts=$(cat "$d"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true)
    tap_eq "$a+$b: no verdict" "" "$verdicts"
    sort "$d/plain.out" > "$d/plain.sorted"
    sort "$d/shim.out" > "$d/shim.sorted"
    lines=$(wc -l < "$d/plain.sorted" | tr -d ' ')
    if [ "$lines" -eq $((NP * CASES)) ] && cmp -s "$d/plain.sorted" "$d/shim.sorted"; then
        tap_ok "$a+$b: the same $((NP * CASES)) result lines as the plain run"
    else
        tap_not_ok "$a+$b: the same $((NP * CASES)) result lines as the plain run (plain has $lines)"
        diff "$d/plain.sorted" "$d/shim.sorted" | head -10 | tap_diag
    fi
    # R rank comm seq kind step flags depth root count dtype op fingerprint backend bytes;
    # the records on the intercommunicators: every communicator but the
    # world, self and the halves (C lines: rank id parent rank size how).
    "$DUMP" "$d"/shim/trace/*.cctrace > "$d/dump" 2> "$d/dump.err"
    r=0
    while [ $r -lt $NP ]; do
        awk -F'\t' -v r=$r '$1 == "C" && $2 == r && ($7 == "comm_init" || $7 == "comm_split") {skip[$3] = 1}
            $1 == "R" && $2 == r && !($3 in skip) && $14 == "mpi" && $5 !~ /^comm_/ {
                print $5, $7, $9, $10, $11, $12, $15}' "$d/dump" > "$d/got.$r"
        if [ "$(wc -l < "$d/got.$r")" -eq $RECORDS ] && cmp -s "$d/shim/expect.$r" "$d/got.$r"; then
            tap_ok "$a+$b: rank $r: the $RECORDS records the rules give, in call order"
        else
            tap_not_ok "$a+$b: rank $r: the $RECORDS records the rules give, in call order"
            diff "$d/shim/expect.$r" "$d/got.$r" | head -10 | tap_diag
            head -3 "$d/dump.err" | tap_diag
        fi
        r=$((r + 1))
    done
done
tap_done
