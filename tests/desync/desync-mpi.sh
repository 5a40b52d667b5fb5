#!/bin/sh
# desync-mpi.sh - each way of going out of step, on 4 MPI ranks over shared
# memory, is reported with the right class, ranks and sequence numbers,
# while the job still runs (the latency targets: make check-timing), by every
# rank; with CCSHIM_ON_DESYNC=abort the job
# exits non-zero instead of hanging.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
tap_plan 68

# Latency: a verdict must come from the detector while the job still runs,
# not from its end: these bounds hold on 2 shared cores.  The targets
# (MISMATCH 100 ms, 300 allowed; DESYNC and DEAD 2 s after the last rank
# blocked) are checked by make check-timing (desync-timing.sh) and measured
# in make bench.  SETTLE: how long every rank waits before MPI_Finalize after
# a mismatched call that completes; under abort the verdict ends the job
# first, so a long one costs nothing when detection works, and a starved
# detector still has the time to judge while the ranks run.
SETTLE=600
MSETTLE=5000
WSETTLE=2000 # warn: nothing ends the job early, every rank waits this long
LATE=10000

AR='allreduce\(count=4, float32, sum\)'
check_case() { # NAME CLASS REGEX MAX_LATENCY_MS [SETTLE_MS]
    local name=$1 cls=$2 re=$3 max=$4 settle=${5:-$SETTLE} lat
    dsx_run "$name" 40 4 CCSHIM_ON_DESYNC=abort SETTLE_MS=$settle -- "$SCENARIO" "$name"
    dsx_check_verdict "$name" "$cls" "$re"
    lat=$(dsx_latency_ms "$name" "$cls")
    tap_check "$name: reported $lat ms after the culprit's call (<= $max)" test "$lat" -le "$max"
}
mismatch_case() { check_case "$1" MISMATCH "$2" $MSETTLE $MSETTLE; }

check_case skip DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=5: ranks 0,2-3 blocked in $AR at seq 5 for N s; rank 1 at seq 4 \(1 behind, in MPI_Finalize\)$" $((SETTLE + LATE))
check_case extra DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=6: rank 1 blocked in $AR at seq 6 for N s; rank 0 at seq 5 \(1 behind, (in MPI_Finalize|exited)\); rank 2 at seq 5 \(1 behind, (in MPI_Finalize|exited)\); rank 3 at seq 5 \(1 behind, (in MPI_Finalize|exited)\)$" $((SETTLE + LATE))
mismatch_case count "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued allreduce\(count=8, float32, sum\) where ranks 0,2-3 issued $AR$"
mismatch_case dtype "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued allreduce\(count=4, int32, sum\) where ranks 0,2-3 issued $AR$"
mismatch_case op "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued allreduce\(count=4, float32, max\) where ranks 0,2-3 issued $AR$"
mismatch_case root "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued bcast\(count=4, float32, root=1\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$"
mismatch_case kind "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued bcast\(count=4, float32, root=0\) where ranks 0,2-3 issued $AR$"
# Same bytes, other basic types (compared beside the fingerprint); a derived
# type whose signature is longer than the others'.
mismatch_case sigtype "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued bcast\(count=4, int32, root=0\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$"
mismatch_case derived "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued bcast\(count=8, float32, root=0\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$"
check_case exit DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=3: ranks 0,2-3 blocked in $AR at seq 3 for N s; rank 1 at seq 2 \(1 behind, exited\)$" $LATE
check_case kill DEAD "^ccshim DEAD comm=0x[0-9a-f]+ size=4 seq=3: ranks 0,2-3 blocked in $AR at seq 3 for N s; rank 1 at seq 2 \(1 behind, died\)$" $LATE
check_case split DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=2 seq=5: rank 0 blocked in $AR at seq 5 for N s; rank 1 at seq 4 \(1 behind, in MPI_Finalize\)$" $((SETTLE + LATE))
# A real deadlock (no rank gone): rank 1 waits in a barrier on a duplicate
# of the world that the others, waiting in the all-reduce, never reach.
# Reported on both communicators after the block threshold (1 s).
dsx_run deadlock 40 4 CCSHIM_ON_DESYNC=abort -- "$SCENARIO" deadlock
lines=$(dsx_lines deadlock DESYNC)
if [ "$DSX_RC" -ne 0 ] && [ "$DSX_RC" -ne 124 ]; then tap_ok "deadlock: abort ends the job (exit $DSX_RC)"
else tap_not_ok "deadlock: abort ends the job (exit $DSX_RC)"; dsx_diag deadlock; fi
tap_check "deadlock: DESYNC on the world names rank 1 blocked in the barrier elsewhere" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=4: ranks 0,2-3 blocked in $2 at seq 4 for N s; rank 1 at seq 3 \(1 behind, blocked in barrier on comm=0x[0-9a-f]+ seq 1\)$"' _ "$lines" "$AR"
tap_check "deadlock: DESYNC on the duplicate names the others blocked in the all-reduce" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=1: rank 1 blocked in barrier at seq 1 for N s; rank 0 at seq 0 \(1 behind, blocked in $2 on comm=0x[0-9a-f]+ seq 4\); rank 2 at seq 0 .*; rank 3 at seq 0 "' _ "$lines" "$AR"
lat=$(dsx_latency_ms deadlock DESYNC)
tap_check "deadlock: reported $lat ms after the last rank blocked (<= $LATE)" test "$lat" -le $LATE

# Under abort, ranks that are past MPI_Finalize when the job is to end (each
# finalizes as soon as its own log has the verdict): MPI_Abort is erroneous
# there (Open MPI says "MPI_Abort() was called after MPI_FINALIZE" and the
# job exits 1); such a process ends itself with status 3 instead, as a rank
# still running would end the job (docs/desync.md, Policy).
dsx_run finalized 40 4 CCSHIM_ON_DESYNC=abort WAIT_VERDICT=1 -- "$SCENARIO" op
tap_eq "finalized: the job ends with status 3" 3 "$DSX_RC"
tap_check "finalized: no MPI_Abort after MPI_Finalize" \
    sh -c '! grep -q "called after MPI_FINALIZE" "$1/out" "$1/err"' _ "$CCS_TMP/finalized"
tap_check "finalized: the abort came from the finalized path (its log line), not before MPI_Finalize" \
    sh -c 'cat "$1"/log-*.txt "$1/err" 2>/dev/null | grep -q "CCSHIM_ON_DESYNC=abort: MPI is finalized in this process"' _ "$CCS_TMP/finalized"

# Only the half that went out of step is named.
tap_eq "split: no verdict names ranks 2 or 3" "" \
    "$(cat "$CCS_TMP/split"/log-*.txt | grep '^ccshim [A-Z]' | sed 's/ \[seen by.*//' |
        grep -E 'rank[s]? ([0-9,-]*[23])' || true)"

# warn (the default): the job runs on; every rank writes its own view; the
# diagnostics and flight recorder land in the trace directory.
dsx_run warn 40 4 SETTLE_MS=$WSETTLE -- "$SCENARIO" op
tap_eq "warn: the job runs on and exits 0" 0 "$DSX_RC"
# One host: one line and one full diagnosis in the job's combined output
# (rank 0's, the lowest rank still running, as the host's claim names it),
# and the verdict in every rank's own file (each acts on it).
tap_eq "warn: one rank logs the MISMATCH (one host), all 4 ranks' files have it" "1 4" \
    "$(dsx_count warn MISMATCH) $(dsx_files warn MISMATCH)"
tap_eq "warn: one line and one block in the combined output of the 4 ranks" "1 1" \
    "$(cat "$CCS_TMP/warn"/log-*.txt | grep -c '^ccshim MISMATCH ') $(dsx_blocks warn)"
tap_check "warn: rank 0's log has the block with the operations side by side" \
    grep -q "^ccshim desync|        3 | allreduce 4 float32 max" "$CCS_TMP/warn/log-0.txt"
tap_eq "warn: the other ranks log neither line nor block" "0 0 0" \
    "$(for r in 1 2 3; do grep -c '^ccshim \(MISMATCH\|desync|\)' "$CCS_TMP/warn/log-$r.txt"; done | tr '\n' ' ' | sed 's/ $//')"
tap_check "warn: the culprit's own stack is in its file in the trace directory" \
    grep -q "^ccshim desync| stack of rank 1 at seq" "$CCS_TMP/warn/trace/ccshim-desync-warn-r1.txt"
tap_check "warn: the line says for which host, that the full report follows, each rank's file, wall-clock and monotonic time" \
    sh -c '[ "$(cat "$1"/log-*.txt | grep -Ec "^ccshim MISMATCH .* \[seen by rank 0 for host .[^ ]*.; full report below; each rank.s: $1/trace/ccshim-desync-warn-r<rank>\.txt; wall=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z at=[0-9.]+\]$")" -eq 1 ]' _ "$CCS_TMP/warn"
files=""
for r in 0 1 2 3; do
    for f in "ccshim-desync-warn-r$r.txt" "ccshim-flight-warn-r$r.flight"; do
        [ -s "$CCS_TMP/warn/trace/$f" ] || files="$files $f"
    done
done
if grep -q '^#define HAVE_ELFUTILS_LIBDWFL_H 1' "$top_builddir/config.h"; then
    tap_check "warn: frames named with function and file:line (libdw)" \
        grep -Eq "^ccshim desync\|   #0 main\+0x[0-9a-f]+ at [^ ]*desync_scenario\.c:[0-9]+( \(inlined [a-z_]+ at [^ ]*desync_scenario\.c:[0-9]+\))? \(desync_scenario\+0x[0-9a-f]+\)$" \
        "$CCS_TMP/warn/log-0.txt"
else
    tap_skip "warn: frames named with function and file:line" "built without elfutils/libdwfl.h"
fi
tap_check "libdw is not linked into the preload library (dlopen'ed when reporting)" \
    sh -c "! readelf -d '$top_builddir/.libs/libccshim-mpi.so' | grep -q 'NEEDED.*libdw'"
tap_eq "warn: ccshim-desync-<job>-r<rank>.txt and ccshim-flight-<job>-r<rank>.flight for every rank" "" "$files"
tap_check "warn: the flight file lists the mismatched call" \
    grep -Eq "^0	3	0x[0-9a-f]+	allreduce	4	float32	max	" "$CCS_TMP/warn/trace/ccshim-flight-warn-r1.flight"
tap_check "warn: the desync file holds the verdict line" grep -q "^ccshim MISMATCH comm=" \
    "$CCS_TMP/warn/trace/ccshim-desync-warn-r0.txt"

# warn, and the job hangs (issue 40): rank 1 skips an all-reduce and goes
# on to MPI_Finalize while the others wait in it.  The rank reporting in
# full (0) then says once what the evidence shows (rank 1 left the call
# out: it finished before that seq), that the job now waits in that call
# until the launcher's timeout, how to end it at once, and where the
# reports are; nobody else says it.  The test ends the hung job itself,
# once the words are out (at most 30 s).
d="$CCS_TMP/warn-skip"
mkdir -p "$d/trace"
setsid "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np 4 env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_TRACE_DIR="$d/trace" \
    CCSHIM_SUMMARY=0 CCSHIM_JOB_ID=warn-skip "$CCSHIM_RUN" --mpi -- "$SCENARIO" skip >"$d/out" 2>"$d/err" &
pg=$!
CCS_PGIDS="$CCS_PGIDS $pg"
i=0
while [ $i -lt 300 ] && ! grep -q "will now wait" "$d/log-0.txt" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
sleep 1 # (any second saying of it would come within a few periods)
kill -KILL "-$pg" 2>/dev/null
wait "$pg" 2>/dev/null
SITE='[^ ]*desync_scenario\.c:[0-9]+'
tap_check "warn-skip: rank 0 names the call rank 1 left out, and the ranks in it" sh -c 'test "$(grep -c "warning: desync: rank 1 left out" "$1"/log-*.txt | paste -sd" ")" = "$1/log-0.txt:1 $1/log-1.txt:0 $1/log-2.txt:0 $1/log-3.txt:0" && grep -Eq "^ccshim\[0@[^]]*\]: warning: desync: rank 1 left out $2 at $3 \(went on to MPI_Finalize after seq 4\); ranks 0,2-3 are in it$" "$1/log-0.txt"' _ "$d" "$AR" "$SITE"
tap_check "warn-skip: rank 0 says once where the job now waits, how to end it, where the reports are" sh -c 'test "$(cat "$1"/log-*.txt | grep -c "will now wait")" = 1 && grep -Eq "^ccshim\[0@[^]]*\]: warning: desync: this job will now wait in $2 at $3 until the launcher.s timeout; --on-desync abort \(CCSHIM_ON_DESYNC=abort\) ends it at once; each rank.s report: $1/trace/ccshim-desync-warn-skip-r<rank>\.txt, its last calls: $1/trace/ccshim-flight-warn-skip-r<rank>\.flight$" "$1/log-0.txt"' _ "$d" "$AR" "$SITE"
tap_eq "warn-skip: the files it names are there; under abort (skip, above) it is not said" "yes 0" \
    "$([ -s "$d/trace/ccshim-desync-warn-skip-r0.txt" ] && [ -s "$d/trace/ccshim-flight-warn-skip-r1.flight" ] && echo yes) $(cat "$CCS_TMP/skip"/log-*.txt | grep -c 'will now wait\|left out')"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag warn-skip

# Two ranks: no majority, both sides named neutrally.
dsx_run op2 40 2 SETTLE_MS=$WSETTLE -- "$SCENARIO" op
tap_eq "op on 2 ranks: both sides named, no majority" \
    "ccshim MISMATCH comm=X size=2 seq=3: rank 0 issued allreduce(count=4, float32, sum), rank 1 issued allreduce(count=4, float32, max)" \
    "$(dsx_lines op2 MISMATCH | sed 's/comm=0x[0-9a-f]*/comm=X/')"
tap_eq "op on 2 ranks: one line and one block in the combined output" "1 1" \
    "$(cat "$CCS_TMP/op2"/log-*.txt | grep -c '^ccshim MISMATCH ') $(dsx_blocks op2)"

# More communicators than a rank's status holds (8): 12, every rank's calls
# on them interleaved, the odd one on the last made at its seq 501 of 2000.
# They take turns in the statuses, alike on every rank, and the search
# keeps the one it narrows in view: every rank names the call at its seq,
# with both operations.  (Before: named 2 s later from the hashes alone, "at
# or before seq 1984", or, with the odd one among idle communicators that
# never came into view, not at all.)
dsx_run many 60 4 SETTLE_MS=$WSETTLE COMMS=12 -- "$SCENARIO" op 2000 500
tap_eq "12 communicators: the odd call named at its seq" \
    "ccshim MISMATCH comm=X size=4 seq=501: rank 1 issued allreduce(count=4, float32, max) where ranks 0,2-3 issued allreduce(count=4, float32, sum)" \
    "$(dsx_lines many MISMATCH | sed 's/comm=0x[0-9a-f]*/comm=X/')"
tap_eq "12 communicators: logged once (one host), in all 4 ranks' files" "1 4" \
    "$(dsx_count many MISMATCH) $(dsx_files many MISMATCH)"
# A seq whose records lie beyond the newest 8192 of every ring when the
# search asks (6 communicators, the odd call at seq 1001 of 4000: about
# 18,000 records back) is still read back and named.  (Before: "the
# records are no longer kept", though the rings held them.)
dsx_run deep 60 4 SETTLE_MS=$WSETTLE COMMS=6 -- "$SCENARIO" op 4000 1000
tap_eq "records 18,000 back in the rings: the odd call named at its seq" \
    "ccshim MISMATCH comm=X size=4 seq=1001: rank 1 issued allreduce(count=4, float32, max) where ranks 0,2-3 issued allreduce(count=4, float32, sum)" \
    "$(dsx_lines deep MISMATCH | sed 's/comm=0x[0-9a-f]*/comm=X/')"
tap_eq "records 18,000 back: logged once (one host), in all 4 ranks' files" "1 4" \
    "$(dsx_count deep MISMATCH) $(dsx_files deep MISMATCH)"

# A healthy run says nothing; no segment is left in /dev/shm.
dsx_run ok 40 4 -- "$SCENARIO" ok 20
tap_eq "ok: exit 0" 0 "$DSX_RC"
tap_eq "ok: no verdict at all" "" "$(cat "$CCS_TMP/ok"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true)"
tap_eq "no shared-memory segment left behind" "" "$(ls /dev/shm 2>/dev/null | grep "^ccshim-dsx-$(id -u)-.*-\(skip\|extra\|count\|dtype\|op\|root\|kind\|sigtype\|derived\|exit\|split\|finalized\|warn\|op2\|many\|deep\|ok\)-" || true)"
tap_done
