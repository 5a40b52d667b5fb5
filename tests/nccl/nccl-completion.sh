#!/bin/sh
# nccl-completion.sh - NCCL completion tracking (docs/nccl.md) on the test
# NCCL in its asynchronous mode (FAKENCCL_ASYNC=1: a call returns once its
# work is queued; the work completes on a worker thread once every member
# has enqueued its own) and the test CUDA driver (tests/cuda/libcuda.so.1).
#
#   - a job that never touches CUDA never gets libcuda loaded;
#   - a stream being captured: no event recorded, no stream query, no
#     communicator created by coalescing, the calls flagged "captured";
#   - a nonblocking ncclCommSplit: rank and size known at its first
#     collective (coalescing works on it);
#   - the source report's hang: 4 ranks of ccshim-trainer-nccl, rank 1
#     skipping a mini-batch in step 3, no step markers, so that only
#     completion on the device can reveal it: DESYNC naming rank 1 with what
#     each rank enqueued and completed and the call sites, while the ranks
#     wait; with abort the job ends through ncclCommAbort, not a timeout
#     (the 2 s and 5 s targets: make check-timing, nccl-timing.sh);
#   - a rank killed mid-run: DEAD; a healthy run (all-reduces and grouped
#     send/recv): events recorded under the rate limit and completed, no
#     verdict; a slow device (every operation 1.3 s, longer than
#     CCSHIM_DESYNC_BLOCK_MS): no verdict.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/nccl/lib.sh"

PROG="$top_builddir/tests/nccl/nccl_track"
DUMP="$top_builddir/tests/ccs_trace_dump"
SHIM="$top_builddir/.libs/libccshim.so"
[ -x "$PROG" ] || tap_skip_all "nccl.h was not found at configure time (nccl_track not built)"
[ -x "$T" ] || tap_skip_all "ccshim-trainer-nccl not built"
[ -f "$top_builddir/tests/cuda/libcuda.so.1" ] || tap_skip_all "the test CUDA driver is not built"
tap_plan 28

# --- one rank: nothing loaded, capture, nonblocking split -------------------
one() { # NAME MODE ENV...: nccl_track MODE as rank 0 of 1 under the shim
    local name=$1 mode=$2; shift 2
    mkdir -p "$CCS_TMP/$name"
    ccs_run_timeout 30 env RANK=0 WORLD_SIZE=1 CCSHIM_SUMMARY=0 CCSHIM_LOG="$CCS_TMP/$name/log" \
        CCSHIM_TRACE_DIR="$CCS_TMP/$name/trace" "$@" LD_PRELOAD="$SHIM" "$PROG" "$mode" \
        >"$CCS_TMP/$name/out" 2>"$CCS_TMP/$name/err"
}

one plain plain
tap_eq "no CUDA in the job (the test driver on the library path): libcuda never loaded" "libcuda=0" \
    "$(cat "$CCS_TMP/plain/out")"

one capture capture FAKENCCL_ASYNC=1 CCSHIM_COALESCE=every:2
tap_eq "capture: no event recorded and no stream asked while the stream is captured" \
    "recorded_during_capture=0
recorded_while_capturing=0
queried_while_capturing=0" "$(head -3 "$CCS_TMP/capture/out")"
tap_eq "capture: no communicator created inside the capture" "comms_created_during=0" \
    "$(sed -n 4p "$CCS_TMP/capture/out")"
tap_eq "capture: events pooled (4 for the stream) and recorded outside the capture" "events_created=4
events_recorded_total=some" "$(sed -n '5,6p' "$CCS_TMP/capture/out")"
recs=$("$DUMP" "$CCS_TMP"/capture/trace/*.cctrace | awk -F'\t' '$1 == "R" && $5 == "allreduce" { print $7 }')
tap_eq "capture: the 4 captured all-reduces are flagged captured, not coalesced; the 6 others coalesce" \
    "in_place,deferred
in_place,coalesced
in_place,deferred
in_place,captured
in_place,captured
in_place,captured
in_place,captured
in_place,coalesced
in_place,deferred
in_place,coalesced" "$recs"
tap_check "capture: ccshim-audit says 4 calls were captured and that replays are not seen" sh -c \
    '"$1" "$2" | grep -q "4 NCCL call(s) were captured into CUDA graphs: seen once, at capture; replays are not"' \
    _ "$CCSHIM_AUDIT" "$CCS_TMP/capture/trace"

one off capture FAKENCCL_ASYNC=1 CCSHIM_NCCL_COMPLETION=0
n=$("$DUMP" "$CCS_TMP"/off/trace/*.cctrace | awk -F'\t' '$1 == "R" && $7 ~ /captured/' | wc -l)
tap_eq "CCSHIM_NCCL_COMPLETION=0: no event created or recorded, the captured calls still flagged" \
    "events_created=0 events_recorded_total=none captured=4" "$(sed -n '5,6p' "$CCS_TMP/off/out" | tr '\n' ' ')captured=$n"

one nonblocking nonblocking FAKENCCL_ASYNC=1 CCSHIM_COALESCE=every:2
tap_eq "nonblocking split: the program's result" "split rank=0 size=1 sum=1" "$(cat "$CCS_TMP/nonblocking/out")"
defs=$("$DUMP" "$CCS_TMP"/nonblocking/trace/*.cctrace | awk -F'\t' '$1 == "C" && $7 == "comm_split" { print $5, $6 }')
tap_eq "nonblocking split: rank and size known (0 of 1)" "0 1" "$defs"
recs=$("$DUMP" "$CCS_TMP"/nonblocking/trace/*.cctrace | awk -F'\t' '$1 == "R" && $5 == "allreduce" { print $7 }' |
    sort | uniq -c | awk '{ print $1, $2 }')
tap_eq "nonblocking split: coalescing works from its first collective (3 deferred, 3 real)" \
    "3 in_place,coalesced
3 in_place,deferred" "$recs"

# --- four ranks of the trainer (job, lines, diag: tests/nccl/lib.sh) -------
AR='allreduce\(count=[0-9]+, float64, sum\)'
job hang 40 FAKENCCL_TIMEOUT=20 -- --inject=skip-minibatch:1:3 --steps 5
l=$(lines hang DESYNC)
tap_check "hang: DESYNC naming rank 1, behind at the seq ranks 0,2-3 enqueued last" sh -c \
    'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=20: ranks 0,2-3 blocked in $2 at seq 20 for N s; rank 1 at seq 19 \(1 behind, exited\)$"' \
    _ "$l" "$AR" || diag hang
tap_eq "hang: one verdict only" 1 "$(echo "$l" | grep -c .)"
# Completed: what the rate-limited events have shown so far: at least the
# first call's event (1), at most 19; near 19 when the poller ran every
# period, as low as 1 when it was starved while a rank enqueued everything.
# Rank 1, gone, is described by the host side or the device side,
# whichever its last publication had.
per=$(grep -h '^ccshim desync|   rank [0-9]' "$CCS_TMP"/hang/log-*.txt | sed 's/(comm rank.*): //; s/;.*//' |
    sed -E 's/completed (1[0-9]|[1-9]) on the device/completed M/; s/rank 1 (issued|enqueued) 19, completed (19|M)$/rank 1 enqueued 19, completed M/' |
    sort -u)
tap_eq "hang: what each rank enqueued and completed on the device" "ccshim desync|   rank 0 enqueued 20, completed M
ccshim desync|   rank 1 enqueued 19, completed M
ccshim desync|   rank 2 enqueued 20, completed M
ccshim desync|   rank 3 enqueued 20, completed M" "$per"
tap_check "hang: the call sites, where ranks 0,2-3 are blocked and where rank 1 last was" sh -c \
    'grep -q "rank 0 .*blocked [0-9.]* s at seq 20 step 0 in .*ccshim-trainer-nccl" "$1" &&
     grep -Eq "rank 1 .*last (completed|enqueued) seq 19 step 0 at .*ccshim-trainer-nccl" "$1"' _ "$CCS_TMP/hang/log-0.txt"
# Reported by the detector, well before the test NCCL's 20 s timeout (the 2 s
# target is checked by make check-timing, tests/nccl/nccl-timing.sh).
secs=$(grep -h "^ccshim DESYNC" "$CCS_TMP"/hang/log-*.txt | sed -n 's/.* for \([0-9.]*\) s;.*/\1/p' | sort -n | tail -1)
tap_check "hang: reported while the ranks waited (${secs:-?} s blocked; <= 10 s)" awk -v s="${secs:-99}" 'BEGIN { exit !(s <= 10.0) }'

job abort 40 FAKENCCL_TIMEOUT=30 CCSHIM_ON_DESYNC=abort -- --inject=skip-minibatch:1:3 --steps 5
tap_eq "abort: no rank left hanging" 0 "$JOB_TIMEOUTS"
tap_check "abort: the job ended by the abort, not the test NCCL's 30 s timeout (took $JOB_WALL s; <= 15 s)" \
    awk -v s="$JOB_WALL" 'BEGIN { exit !(s <= 15.0) }'
tap_check "abort: through ncclCommAbort (the waiting work failed)" sh -c \
    'grep -q "CCSHIM_ON_DESYNC=abort: aborting the job" "$1/log-0.txt" &&
     grep -q "cuStreamSynchronize failed (the asynchronous NCCL reported an error)" "$1/out-0"' _ "$CCS_TMP/abort"

# All of a rank's work enqueued before the poller's next period (a 250 ms
# period here; under load a starved background thread does the same): the
# first call's event still shows completion, so the hang is still seen
# (before the events were made at a stream's first call, 4 of 4 such runs
# ended at the test NCCL's timeout with "no progress" warnings only).
job quick 40 FAKENCCL_TIMEOUT=20 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_PERIOD_MS=250 -- \
    --inject=skip-minibatch:1:3 --steps 5
l=$(lines quick DESYNC)
tap_check "quick: DESYNC naming rank 1 though every call came within one period" sh -c \
    'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=20: ranks 0,2-3 blocked in $2 at seq 20 for N s; rank 1 at seq 19 \(1 behind, exited\)$"' \
    _ "$l" "$AR" || diag quick
tap_check "quick: the job ended through the abort, not the 20 s timeout (took $JOB_WALL s; <= 15 s)" \
    awk -v s="$JOB_WALL" -v t="$JOB_TIMEOUTS" 'BEGIN { exit !(s <= 15.0 && t == 0) }'

# Rank 2 is killed wherever it is: before its next all-reduce (behind), or
# after enqueueing the one the others wait at, before its part ran (it
# published the same seq as they did: "issued it").  A rank behind that is
# dead is named at once, with the ranks blocked at that instant: one, two
# or all three of the others (each rank reports what it saw first, and the
# abort ends the job), so every line names rank 2 and some of 0, 1 and 3.
JOB_KILL_AFTER=1.5 job killed 40 FAKENCCL_TIMEOUT=30 CCSHIM_ON_DESYNC=abort -- --steps 100000
l=$(lines killed DEAD)
tap_check "killed: every DEAD line names rank 2, died, for ranks waiting on the device" sh -c \
    'test -n "$1" && ! echo "$1" | grep -Evq "^ccshim DEAD comm=0x[0-9a-f]+ size=4 seq=[0-9]+: ranks? (0|1|3|0-1|0,3|1,3|0-1,3) blocked in $2 at seq [0-9]+ for N s; rank 2 at seq [0-9]+ \(([0-9]+ behind|issued it), died\)$"' \
    _ "$l" "$AR" || diag killed
tap_eq "killed: the others end through the abort" 0 "$JOB_TIMEOUTS"

# Healthy, about 1.5 s of all-reduces and send/recv rings in groups: the
# events complete, nothing is said.
job healthy 60 CCSHIM_LOG_LEVEL=info -- --loss siglip-ring --steps 150
tap_eq "healthy run with groups (send/recv ring): every rank succeeds" " 0 0 0 0" "$JOB_RCS"
tap_eq "healthy run: no verdict, no warning" "" "$(cat "$CCS_TMP"/healthy/log-*.txt | grep -E '^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) |warning')"
# Per rank: events recorded E, stream queries Q, completions reported C,
# polls P (the closing tracking line).  What tracking guarantees: the first
# call's event, and then at most one event per poll period (E <= P + 1,
# never more than 1000 here); every event completes (each call is waited
# for) and is reported at a later poll, but for the last few recorded before
# the exit (C >= E - 4, the events a stream holds; C <= E + Q).  The number
# of polls is not asserted per rank, only that the job's pollers ran (some
# rank reported >= 10 completions): in one CI run (2026-12-04) one rank's
# poller did not run during this ~1 s job (1 event, 0 completions; the other
# ranks ~57).  Why is not known: starving the nice-10 thread does not do it
# (all ranks and six busy loops on one CPU: every rank polled every period),
# and the per-rank figures are in this point's name when it fails.
track=$(for f in "$CCS_TMP"/healthy/log-*.txt; do
    sed -n 's/.*NCCL completion tracking: \([0-9]*\) events recorded, \([0-9]*\) stream queries, \([0-9]*\) completions reported, .* \([0-9]*\) polls$/\1 \2 \3 \4/p' "$f"
done)
periods=$(cat "$CCS_TMP"/healthy/log-*.txt | sed -n 's/.*desync: background thread used .*, \([0-9]*\) periods of .*/\1/p' | paste -sd' ' -)
tap_check "healthy run: on every rank events recorded at most one per period and their completions reported (E Q C P: $(echo "$track" | paste -sd, -); desync periods: $periods)" \
    sh -c '[ "$(echo "$1" | awk "NF == 4 && \$1 >= 1 && \$1 <= \$4 + 1 && \$1 <= 1000 && \$3 >= \$1 - 4 && \$3 <= \$1 + \$2" | wc -l)" = 4 ] &&
           [ "$(echo "$1" | awk "\$3 >= 10" | wc -l)" -ge 1 ]' _ "$track" ||
    diag healthy # each rank's closing tracking line, with how many times its poller ran

job slow 60 FAKENCCL_DELAY_MS=1300 -- --steps 1
tap_eq "slow device (1.3 s per operation): every rank succeeds" " 0 0 0 0" "$JOB_RCS"
tap_eq "slow device: no verdict" "" "$(cat "$CCS_TMP"/slow/log-*.txt | grep -E '^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) ')"
tap_check "slow device: the wait was seen (enqueued, not completed) and its completion too" sh -c \
    'grep -q "enqueued [0-9]*, completed [0-9]* on the device; no progress" "$1" &&
     grep -q "progress on the device again after 1\.[0-9] s" "$1"' _ "$CCS_TMP/slow/log-0.txt"
[ "$TAP_FAILED" -eq 0 ] || diag slow
tap_done
