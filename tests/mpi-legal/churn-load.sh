#!/bin/sh
# churn-load.sh - communicator churn under load (issue 39), run by `make
# check-timing` (scripts/test.sh runs it once, after make check), not by make
# check: tests/mpi-legal/churn beside two busy loops, on 3 and 5 ranks, at two
# rates (40 rounds of 600 x (allgather + barrier) between dup and free, and
# 400 rounds of 60: ten times the frees), under ccshim-run --on-desync abort:
# exit 0, no verdict, the plain run's result lines.  With the cores taken, the
# collector (a thread at nice 10) gets a core least often and falls furthest
# behind the rings: the records just before each MPI_Comm_free are the ones
# it reads last.
#
# Why not in make check: the two busy loops would take both cores from the
# tests make -j runs beside it (and their own bounds); check-timing runs its
# tests one at a time.
. "$top_srcdir/tests/tap.sh"
[ "${CCSHIM_CHECK_TIMING:-0}" = 1 ] || tap_skip_all "under load: run by make check-timing"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
CHURN="$top_builddir/tests/mpi-legal/churn"
[ -x "$CHURN" ] || tap_skip_all "tests/mpi-legal/churn not built"
NPS=${CHURN_NPS:-3 5}
RATES="40:600 400:60"
n=0
for np in $NPS; do for r in $RATES; do n=$((n + 3)); done; done
tap_plan "$n"

# The load: two busy loops, each in a process group of its own that
# tap.sh's exit trap kills.
for i in 1 2; do
    setsid sh -c 'while :; do :; done' &
    CCS_PGIDS="$CCS_PGIDS $!"
done

for np in $NPS; do
    for r in $RATES; do
        rounds=${r%:*} iters=${r#*:}
        d="$CCS_TMP/np$np-$rounds"
        mkdir -p "$d"
        ccs_mpirun 120 "$np" "$CHURN" "$rounds" "$iters" > "$d/plain.out" 2> "$d/plain.err"
        prc=$?
        t0=$(date +%s)
        ccs_mpirun 180 "$np" "$CCSHIM_RUN" --mpi --on-desync abort --log "$d/log-%r.txt" --summary 0 \
            --set CCSHIM_JOB_ID="churnload$np" -- "$CHURN" "$rounds" "$iters" > "$d/shim.out" 2> "$d/shim.err"
        src=$?
        echo "# figure: churn $rounds x $iters on $np ranks beside 2 busy loops, under ccshim: $(($(date +%s) - t0)) s"
        what="$np ranks, $rounds rounds of $iters"
        tap_eq "$what: exits 0 under ccshim with --on-desync abort (the plain run: $prc)" 0 "$src"
        verdicts=$(cat "$d"/log-*.txt "$d/shim.err" 2>/dev/null | grep -E '^ccshim [A-Z]' || true)
        tap_eq "$what: no verdict (verdict lines)" 0 "$(printf '%s' "$verdicts" | grep -c '^')"
        [ -z "$verdicts" ] || echo "$verdicts" | head -5 | tap_diag
        sort "$d/plain.out" > "$d/plain.sorted"
        sort "$d/shim.out" > "$d/shim.sorted"
        if [ "$prc" = 0 ] && [ "$(wc -l < "$d/plain.sorted")" -eq "$np" ] && diff -u "$d/plain.sorted" "$d/shim.sorted" > "$d/diff"; then
            tap_ok "$what: the plain run's result lines"
        else
            tap_not_ok "$what: the plain run's result lines"
            { cat "$d/diff"; head -20 "$d/plain.err" "$d/shim.err"; } 2>/dev/null | tap_diag
        fi
    done
done
tap_done
