#!/bin/sh
# scripts/soak-nccl.sh [N] - runs nccl-completion.sh's "killed" and "healthy"
# scenarios N times (default 50) beside two busy loops, and counts misses:
#   killed:  rank 2 of 4 killed 1.5 s in under CCSHIM_ON_DESYNC=abort: DEAD
#            lines only, each naming rank 2 (behind, or dead inside the
#            collective the others wait in) and some of ranks 0, 1 and 3
#            blocked, and the job ended through the abort;
#   healthy: 4 ranks, all-reduces and grouped send/recv: every rank exits 0,
#            no verdict or warning, and on every rank at least 10 events
#            recorded and 10 completions reported.
# The evidence for issue 22's intermittent misses (docs/desync.md and
# docs/nccl.md, Limits).  Needs a build (scripts/setup.sh); the busy loops
# run at SOAK_NICE (default 0, the ranks' own priority; the detection thread
# runs at nice 10) and are stopped at the end.  Kept logs of misses are
# named on their line.  Exit status: 0 when nothing was missed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
top_srcdir=$top
top_builddir=${CCSHIM_BUILD:-$top/_build}
export top_srcdir top_builddir
n=${1:-50}
CCS_KEEP=1
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/nccl/lib.sh"
[ -x "$T" ] || { echo "soak-nccl: $T not built (run scripts/setup.sh)"; exit 2; }

busy=""
for i in 1 2; do
    nice -n "${SOAK_NICE:-0}" sh -c 'while :; do :; done' &
    busy="$busy $!"
done
stop_busy() { for p in $busy; do kill "$p" 2>/dev/null; done; }
trap 'stop_busy; tap_cleanup' EXIT

AR='allreduce\(count=[0-9]+, float64, sum\)'
miss_k=0 miss_h=0
for i in $(seq 1 "$n"); do
    JOB_KILL_AFTER=1.5 job "k$i" 40 FAKENCCL_TIMEOUT=30 CCSHIM_ON_DESYNC=abort -- --steps 100000
    l=$(lines "k$i" DEAD)
    if [ "$JOB_TIMEOUTS" = 0 ] && [ -n "$l" ] && ! echo "$l" | grep -Evq "^ccshim DEAD comm=0x[0-9a-f]+ size=4 seq=[0-9]+: ranks? (0|1|3|0-1|0,3|1,3|0-1,3) blocked in $AR at seq [0-9]+ for N s; rank 2 at seq [0-9]+ \(([0-9]+ behind|issued it), died\)$"; then
        echo "$i killed: ok in $JOB_WALL s: $(echo "$l" | sed -n 's/.*; rank 2 at/rank 2 at/p' | sort -u | tr '\n' ' ')"
        rm -rf "${CCS_TMP:?}/k$i"
    else
        miss_k=$((miss_k + 1))
        echo "$i killed: MISS ($JOB_WALL s, $JOB_TIMEOUTS ranks at the limit), logs in $CCS_TMP/k$i"
    fi
    job "h$i" 60 CCSHIM_LOG_LEVEL=info -- --loss siglip-ring --steps 150
    bad=$(cat "$CCS_TMP/h$i"/log-*.txt | grep -E '^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) |warning' || true)
    counts=$(cat "$CCS_TMP/h$i"/log-*.txt |
        sed -n 's/.*NCCL completion tracking: \([0-9]*\) events recorded, [0-9]* stream queries, \([0-9]*\) completions reported.*/\1 \2/p')
    good=$(echo "$counts" | awk '$1 >= 10 && $1 <= 1000 && $2 >= 10' | wc -l)
    if [ "$JOB_RCS" = " 0 0 0 0" ] && [ -z "$bad" ] && [ "$good" = 4 ]; then
        echo "$i healthy: ok in $JOB_WALL s: events/completions $(echo $counts)"
        rm -rf "${CCS_TMP:?}/h$i"
    else
        miss_h=$((miss_h + 1))
        echo "$i healthy: MISS (exit statuses$JOB_RCS; events/completions $(echo $counts)), logs in $CCS_TMP/h$i"
    fi
done
rmdir "$CCS_TMP" 2>/dev/null && CCS_KEEP=0
echo "soak-nccl: $n rounds beside 2 busy loops (nice ${SOAK_NICE:-0}): killed $miss_k missed, healthy $miss_h missed"
[ "$miss_k" -eq 0 ] && [ "$miss_h" -eq 0 ]
