#!/bin/sh
# mpi-legal.sh - correct MPI programs are never called desynchronised: the
# corpus in legal.c (derived against basic types, MPI_IN_PLACE, zero counts,
# v and w variants, intercommunicators, MPI_THREAD_MULTIPLE) on 2 to 5
# ranks under CCSHIM_ON_DESYNC=abort exits 0, reports no verdict and
# prints exactly what a plain run (no ccshim) prints.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
LEGAL="$top_builddir/tests/mpi-legal/legal"
[ -x "$LEGAL" ] || tap_skip_all "tests/mpi-legal/legal not built"
NPS=${LEGAL_NPS:-2 3 4 5}
n=0
for np in $NPS; do n=$((n + 4)); done
tap_plan "$n"

for np in $NPS; do
    d="$CCS_TMP/np$np"
    mkdir -p "$d/trace"
    ccs_mpirun 90 "$np" "$LEGAL" > "$d/plain.out" 2> "$d/plain.err"
    prc=$?
    ccs_mpirun 90 "$np" env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_TRACE_DIR="$d/trace" CCSHIM_SUMMARY=0 \
        CCSHIM_JOB_ID="legal$np" CCSHIM_ON_DESYNC=abort "$CCSHIM_RUN" --mpi -- "$LEGAL" > "$d/shim.out" 2> "$d/shim.err"
    src=$?
    tap_eq "$np ranks: the plain run exits 0" 0 "$prc"
    tap_eq "$np ranks: under ccshim with --on-desync abort it exits 0" 0 "$src"
    verdicts=$(cat "$d"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true)
    tap_eq "$np ranks: no verdict" "" "$verdicts"
    sort "$d/plain.out" > "$d/plain.sorted"
    sort "$d/shim.out" > "$d/shim.sorted"
    lines=$(wc -l < "$d/plain.sorted" | tr -d ' ')
    if [ "$lines" -gt "$((np * 20))" ] && diff -u "$d/plain.sorted" "$d/shim.sorted" > "$d/diff"; then
        tap_ok "$np ranks: the same $lines result lines as the plain run"
    else
        tap_not_ok "$np ranks: the same $lines result lines as the plain run"
        { head -20 "$d/diff"; head -20 "$d/plain.err" "$d/shim.err"; } 2>/dev/null | tap_diag
    fi
done
tap_done
