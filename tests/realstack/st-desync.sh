#!/bin/sh
# st-desync.sh - desync on the real stack, without coalescing: the report's
# script (tests/realstack/report_job.py, the real CachedLossMixin) on 2 ranks
# where rank 1's batch in step 2 is one mini-batch shorter (12 rows: 3
# mini-batches per column, 6 reductions instead of 8), the way a per-rank
# short last batch does it.  The same 80-byte all-reduces then match across
# steps and MPI would silently mix them; ccshim says DESYNC at once, naming
# the step, both counts and gradcache.py's line, and with --on-desync abort
# the job ends (rc != 0) within seconds instead of hanging at the end.
# The job ends in seconds whatever the full report does: with the report's
# trace file stalled (a FIFO nobody reads, as a hung file system) the job
# ends REPORT_BUDGET_MS after the verdict without it; with DEBUGINFOD_URLS
# naming a server that never answers, the report does not ask it.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 12
# latency NAME: seconds from NAME's first verdict (its wall clock time, UTC,
# milliseconds) to END, the job's end
latency() {
    local v
    v=$(sed -n 's/^ccshim DESYNC .*\[seen by rank [0-9]*[^]]* wall=\([0-9T:.-]*\)Z .*/\1/p' "$CCS_TMP/$1.err" | sort | head -n 1)
    awk -v a="$(date -u -d "${v:-1970-01-01}" +%s.%N)" -v b="$end" 'BEGIN {printf "%.1f", b - a}'
}

rs skip 2 --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 2
rc=$?
end=$(date +%s.%N)
tap_check "one mini-batch fewer on rank 1 in step 2, --on-desync abort: the job ends with an error (rc $rc)" \
    test "$rc" != 0 -a "$rc" != 124
# (A rank whose records of the step are not all folded yet when the verdict
# is made is counted as "at least" what was folded: rank 0's 8 reads "at
# least 7" or "at least 8" in about half of the runs beside busy loops,
# seen from either rank.)
tap_check "DESYNC: ranks out of step in step 2, rank 0 issued 8 (or at least 7 or 8), rank 1 issued 6" \
    grep -qE 'ccshim DESYNC comm=.*: ranks out of step: in step 2 rank 0 issued (8|at least [78]), rank 1 issued 6;' \
    "$CCS_TMP/skip.err"
# (Each rank's "last" is its newest folded record when the verdict is made:
# under load one rank's may already be a later call of the Trainer's, so
# the line of the backward is asked of one of them, not of both.)
tap_check "  ... naming gradcache.py's line (the backward's)" \
    grep -qE 'ranks out of step: .*rank [01] last at gradcache.py:[0-9]+ in _backward_hook' \
    "$CCS_TMP/skip.err"
lat=$(latency skip)
echo "# the job ended ${lat} s after the first verdict"
tap_check "the job ended within 10 s of the verdict (${lat} s), not at a timeout" \
    awk -v l="$lat" 'BEGIN {exit !(l >= 0 && l <= 10)}'

# Rank 0 writes the full report; its file in the trace directory is a FIFO
# nobody opens for reading: the report blocks in open(2) for good.
mkdir -p "$CCS_TMP/stall.tr"
mkfifo "$CCS_TMP/stall.tr/ccshim-desync-stall-r0.txt"
CCSHIM_JOB_ID=stall rs stall 2 --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 2
rc=$?
end=$(date +%s.%N)
lat=$(latency stall)
tap_check "rank 0's report stalled on its trace file: the job still ends with an error (rc $rc)" \
    test "$rc" != 0 -a "$rc" != 124
tap_check "  ... rank 0 says its report was cut short, then aborts" \
    sh -c "grep -A1 \"ccshim\\[0@[^]]*\\]: warning: CCSHIM_ON_DESYNC=abort: this rank's report was still being written\" '$CCS_TMP/stall.err' |
           grep -q 'aborting the job'"
tap_check "  ... within 10 s of the verdict (${lat} s): 3 s of report budget, not the report's time" \
    awk -v l="$lat" 'BEGIN {exit !(l >= 0 && l <= 10)}'

# A debuginfod server that accepts connections and never answers; it
# counts the connections it accepted in dbgd.conns.
echo 0 >"$CCS_TMP/dbgd.conns"
"$RS_PY" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
held = []
t = time.time() + 120
while time.time() < t:
    s.settimeout(t - time.time())
    try: held.append(s.accept()[0])
    except OSError: break
    open(sys.argv[2], "w").write("%d\n" % len(held))
' "$CCS_TMP/dbgd.port" "$CCS_TMP/dbgd.conns" &
dbgd=$!
for _ in $(seq 50); do [ -s "$CCS_TMP/dbgd.port" ] && break; sleep 0.1; done
DEBUGINFOD_URLS=http://127.0.0.1:$(cat "$CCS_TMP/dbgd.port") DEBUGINFOD_TIMEOUT=60 CCSHIM_LOG_LEVEL=info \
    rs dbgd 2 --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 2
rc=$?
end=$(date +%s.%N)
kill "$dbgd" 2>/dev/null
wait "$dbgd" 2>/dev/null
lat=$(latency dbgd)
tap_check "DEBUGINFOD_URLS names a server that never answers: the job ends with an error (rc $rc)" \
    test "$rc" != 0 -a "$rc" != 124
tap_check "  ... the server not asked ($(cat "$CCS_TMP/dbgd.conns") connections), and the reports say why" \
    sh -c "[ \"\$(cat '$CCS_TMP/dbgd.conns')\" = 0 ] &&
           grep -q 'DEBUGINFOD_URLS is set: desync reports do not ask a debuginfod server' '$CCS_TMP/dbgd.err'"
tap_check "  ... within 10 s of the verdict (${lat} s)" \
    awk -v l="$lat" 'BEGIN {exit !(l >= 0 && l <= 10)}'

# The same with coalescing on.  In the first step rank 1's shorter batch
# makes fewer no-grad forwards too (6 against 8): the torch helper does not
# take the step as announced, and the detector names the ranks as above.
# In step 2 (after an announced first step, which the report's 80-byte
# buckets, below CCSHIM_COALESCE_MIN_BYTES, then hand back to the job as
# written) the same.
rs cskip0 2 --coalesce auto --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 0
rc=$?
tap_eq "coalescing on, rank 1 short in step 0: not announced (no-grad forwards 8 and 6), DESYNC ranks out of step, the job ended" \
    "1 1 1" "$(grep -c 'ccshim_torch\[0\]: the ranks made different numbers of no-grad forwards before their first backward pass (8, 6)' "$CCS_TMP/cskip0.err") $(grep -qE 'ccshim DESYNC comm=.*: ranks out of step: (in step [01] |rank 1 marked [0-9]+ steps by seq [0-9]+ where rank 0 is still in step 0( \([0-9]+ backward passes in it so far\))?; in step 0 rank 0 issued)' "$CCS_TMP/cskip0.err" && echo 1) $([ "$rc" != 0 ] && [ "$rc" != 124 ] && echo 1)"
rs cskip2 2 --coalesce auto --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 2
rc=$?
tap_eq "coalescing on, rank 1 short in step 2: announced first step handed back (buckets below CCSHIM_COALESCE_MIN_BYTES), DESYNC in step 2, the job ended" \
    "1 1 1" "$(grep -c "ccshim_torch\[0\]: ccshim's coalescing saw none of the first step's all-reduces" "$CCS_TMP/cskip2.err") $(grep -qE 'ccshim DESYNC comm=.*: ranks out of step: in step 2 rank 0 issued (8|at least [78]), rank 1 issued 6;' "$CCS_TMP/cskip2.err" && echo 1) $([ "$rc" != 0 ] && [ "$rc" != 124 ] && echo 1)"
tap_done
