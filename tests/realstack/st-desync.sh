#!/bin/sh
# st-desync.sh - desync on the real stack, without coalescing: the report's
# script (tests/realstack/report_job.py, the real CachedLossMixin) on 2 ranks
# where rank 1's batch in step 2 is one mini-batch shorter (12 rows: 3
# mini-batches per column, 6 reductions instead of 8), the way a per-rank
# short last batch does it.  The same 80-byte all-reduces then match across
# steps and MPI would silently mix them; ccshim says DESYNC at once, naming
# the step, both counts and gradcache.py's line, and with --on-desync abort
# the job ends (rc != 0) within seconds instead of hanging at the end.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 4
rs skip 2 --on-desync abort -- report_job.py --steps 5 --skip-rank 1 --skip-step 2
rc=$?
end=$(date +%s.%N)
tap_check "one mini-batch fewer on rank 1 in step 2, --on-desync abort: the job ends with an error (rc $rc)" \
    test "$rc" != 0 -a "$rc" != 124
tap_check "DESYNC: ranks out of step in step 2, rank 0 issued 8 (or at least 7 when seen from rank 1), rank 1 issued 6" \
    grep -qE 'ccshim DESYNC comm=.*: ranks out of step: in step 2 rank 0 issued (8|at least 7), rank 1 issued 6;' \
    "$CCS_TMP/skip.err"
# (Each rank's "last" is its newest folded record when the verdict is made:
# under load one rank's may already be a later call of the Trainer's, so
# the line of the backward is asked of one of them, not of both.)
tap_check "  ... naming gradcache.py's line (the backward's)" \
    grep -qE 'ranks out of step: .*rank [01] last at gradcache.py:[0-9]+ in _backward_hook' \
    "$CCS_TMP/skip.err"
# the first verdict's wall clock time (UTC, milliseconds) to the job's end
v=$(sed -n 's/^ccshim DESYNC .*\[seen by rank [0-9]* wall=\([0-9T:.-]*\)Z .*/\1/p' "$CCS_TMP/skip.err" | sort | head -n 1)
lat=$(awk -v a="$(date -u -d "${v:-1970-01-01}" +%s.%N)" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
echo "# verdict at $v UTC; the job ended ${lat} s later"
tap_check "the job ended within 10 s of the verdict (${lat} s), not at a timeout" \
    awk -v l="$lat" 'BEGIN {exit !(l >= 0 && l <= 10)}'
tap_done
