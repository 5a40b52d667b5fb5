#!/bin/sh
# churn.sh - communicator churn at a high rate is never called desynchronised
# (issue 39): tests/mpi-legal/churn (40 rounds of MPI_Comm_dup, 600 x
# (MPI_Allgather + MPI_Barrier), MPI_Comm_free, on every rank alike, as
# mpi4py's test suite does with a COMM_WORLD.Dup() per test) on 3 and 5
# ranks under ccshim-run --on-desync abort exits 0, reports no verdict and
# prints exactly the plain run's result lines.  A freed communicator's last
# records come thousands a second just before its MPI_Comm_free: before the
# fix the collector skipped them, published the communicator as freed at a
# stale seq and a waiting rank was "certain" at once: a false DESYNC ("freed
# the communicator") and an abort in most runs.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
CHURN="$top_builddir/tests/mpi-legal/churn"
[ -x "$CHURN" ] || tap_skip_all "tests/mpi-legal/churn not built"
NPS=${CHURN_NPS:-3 5}
n=0
for np in $NPS; do n=$((n + 4)); done
tap_plan "$n"

for np in $NPS; do
    d="$CCS_TMP/np$np"
    mkdir -p "$d"
    ccs_mpirun 120 "$np" "$CHURN" > "$d/plain.out" 2> "$d/plain.err"
    prc=$?
    t0=$(date +%s)
    ccs_mpirun 120 "$np" "$CCSHIM_RUN" --mpi --on-desync abort --log "$d/log-%r.txt" --summary 0 \
        --set CCSHIM_JOB_ID="churn$np" -- "$CHURN" > "$d/shim.out" 2> "$d/shim.err"
    src=$?
    echo "# figure: churn on $np ranks under ccshim: $(($(date +%s) - t0)) s"
    tap_eq "$np ranks: the plain run exits 0" 0 "$prc"
    tap_eq "$np ranks: under ccshim with --on-desync abort it exits 0" 0 "$src"
    verdicts=$(cat "$d"/log-*.txt "$d/shim.err" 2>/dev/null | grep -E '^ccshim [A-Z]' || true)
    tap_eq "$np ranks: no verdict (verdict lines)" 0 "$(printf '%s' "$verdicts" | grep -c '^')"
    sort "$d/plain.out" > "$d/plain.sorted"
    sort "$d/shim.out" > "$d/shim.sorted"
    want=$(i=0; while [ $i -lt "$np" ]; do echo "churn rank $i: 40 rounds, 48000 collectives"; i=$((i + 1)); done)
    if [ "$(sed 's/, [0-9a-f]*$//' "$d/plain.sorted")" = "$want" ] && diff -u "$d/plain.sorted" "$d/shim.sorted" > "$d/diff"; then
        tap_ok "$np ranks: each rank's 48000 collectives on 40 communicators, the same results as the plain run"
    else
        tap_not_ok "$np ranks: each rank's 48000 collectives on 40 communicators, the same results as the plain run"
        { cat "$d/plain.sorted" "$d/diff"; head -20 "$d/plain.err" "$d/shim.err"; } 2>/dev/null | tap_diag
    fi
    [ -z "$verdicts" ] || echo "$verdicts" | head -5 | tap_diag
done
tap_done
