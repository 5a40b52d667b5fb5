#!/bin/sh
# coalesce-desync.sh - under coalescing, a rank whose step has fewer or more
# all-reduces than the others is a DESYNC naming it, the step and both
# counts, not a STRAGGLER and a hang (docs/coalescing.md, "A rank that
# skips a mini-batch"): the reference trainer over MPI and the NCCL trainer
# over the test NCCL in its asynchronous mode, a skipped and an extra
# mini-batch, under auto and every:N, with and without abort, 2 and 4 ranks;
# healthy coalesced runs of 100 steps get no verdict.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
[ -x "$CCSHIM_RUN" ] || tap_skip_all "ccshim-run not built"
tap_plan 29

# 8 all-reduces per step on 2 ranks (16 rows per rank, 2 columns of 4-row
# mini-batches), 4 on 4 ranks.
A="--batch 32 --mini-batch 4 --steps 8"

# run NAME SECS NP SHIM-OPTIONS -- TRAINER-OPTIONS: the MPI trainer under ccshim-run
run() {
    local name=$1 secs=$2 np=$3 opts=""; shift 3
    while [ "$1" != "--" ]; do opts="$opts $1"; shift; done
    shift
    # shellcheck disable=SC2086
    ccs_mpirun "$secs" "$np" "$CCSHIM_RUN" --mpi $opts -- "$CCSHIM_TRAINER" "$@" >"$CCS_TMP/$name.out" 2>"$CCS_TMP/$name.err"
}
# verdict NAME: the first boundary DESYNC line that gives both counts (each
# rank logs what its own view showed: one that saw the others gone, after
# the job was stopped, names no count of theirs)
verdict() {
    { grep '^ccshim DESYNC .* ended step .* where the others' "$CCS_TMP/$1.err"
      grep '^ccshim DESYNC .* ended step' "$CCS_TMP/$1.err"; } | head -n 1 | sed 's/^ccshim DESYNC comm=[^:]*: //'
}
# counts NAME: "rank R ended step S after X all-reduces where the others made Y"
counts() { verdict "$1" | sed -n 's/^\(ranks* [0-9,-]* ended step [0-9]* after [0-9]* all-reduces where the others made [0-9]*\).*/\1/p'; }
# warn_seen NAME RANK STEP X Y: under warn, the host's one line names RANK
# ending STEP after X all-reduces, with the others' Y; or, where the rank
# the host's claim named to log it had already run on to the end of the job
# (the others' real calls matched the odd rank's later ones), its own view:
# the others gone, their count unknown (docs/desync.md, Limits).
# When it is not there, what the job logged of its verdicts and claims goes
# to the TAP output (CI's one failure of 'MPI every:4, warn' kept nothing to
# read; 6 runs by hand gave the expected line each time).
warn_seen() {
    grep -Eq "^ccshim DESYNC comm=[^:]*: rank $2 ended step $3 after $4 all-reduces( where the others made $5|; [0-9]+ members? gone)[^0-9]" \
        "$CCS_TMP/$1.err" && return 0
    echo "# $1: its verdict lines and desync log lines (rc of the run: see above):"
    grep -E '^ccshim (DESYNC|MISMATCH|DEAD|STRAGGLER) |desync|claim' "$CCS_TMP/$1.err" | cut -c1-400 | tap_diag
    return 1
}
# blocked_s NAME: the seconds the others had waited when it was reported
blocked_s() { verdict "$1" | sed -n 's/.* blocked in .* for \([0-9.]*\) s.*/\1/p'; }
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
ended() { [ "$1" -ne 0 ] && [ "$1" -ne 124 ]; }
stragglers() { grep -c '^ccshim STRAGGLER' "$CCS_TMP/$1.err"; }

# --- MPI, under abort: the job ends with the verdict ------------------------
run skip2 60 2 --coalesce auto --on-desync abort -- $A --inject skip-minibatch:1:3; rc=$?
tap_eq "MPI auto, 2 ranks, rank 1 skips a mini-batch in step 3: DESYNC with both counts" \
    "rank 1 ended step 3 after 7 all-reduces where the others made 8" "$(counts skip2)"
tap_eq "... reported within 2 s of rank 0 blocking ($(blocked_s skip2) s), the job ended (rc $rc), no straggler" \
    "1 1 0" "$(within "$(blocked_s skip2)" 2.0 && echo 1) $(ended $rc && echo 1) $(stragglers skip2)"

run extra2 60 2 --coalesce auto --on-desync abort -- $A --inject extra-minibatch:0:3; rc=$?
tap_eq "MPI auto, 2 ranks, rank 0 replays one more: DESYNC with both counts" \
    "rank 0 ended step 3 after 9 all-reduces where the others made 8" "$(counts extra2)"
tap_check "... the job ended (rc $rc)" ended $rc

run skip4 60 4 --coalesce every:4 --on-desync abort -- $A --inject skip-minibatch:2:3; rc=$?
tap_eq "MPI every:4, 4 ranks, rank 2 skips: DESYNC with both counts" \
    "rank 2 ended step 3 after 3 all-reduces where the others made 4" "$(counts skip4)"
case "$(verdict skip4)" in *"; ranks 0-1,3 blocked in allreduce"*) named=yes ;; *) named=no ;; esac
tap_eq "... names the others, blocked in the step's real all-reduce (ranks 0-1,3); the job ended (rc $rc)" \
    "yes 1" "$named $(ended $rc && echo 1)"

run extra4 60 4 --coalesce every:4 --on-desync abort -- $A --inject extra-minibatch:3:3; rc=$?
tap_eq "MPI every:4, 4 ranks, rank 3 replays one more: DESYNC with both counts" \
    "rank 3 ended step 3 after 5 all-reduces where the others made 4" "$(counts extra4)"
tap_check "... the job ended (rc $rc)" ended $rc

run extra4a 60 4 --coalesce auto --on-desync abort -- $A --inject extra-minibatch:1:4; rc=$?
tap_eq "MPI auto, 4 ranks, rank 1 replays one more in step 4: DESYNC with both counts" \
    "rank 1 ended step 4 after 5 all-reduces where the others made 4" "$(counts extra4a)"
tap_check "... the job ended (rc $rc)" ended $rc

# --- MPI, warn: the verdict, and the job left as it is ----------------------
# Under warn the job goes on: coalescing answered rank 0's deferred
# all-reduces and its real ones match rank 1's later calls, so rank 0, the
# rank named to log the host's line, may reach MPI_Finalize before its own
# rules judge (seen in CI: "rank 1 ended step 3 after 7 all-reduces; 1
# member gone").
run skipw 15 2 --coalesce auto -- $A --inject skip-minibatch:1:3
tap_check "MPI auto, warn: the same DESYNC (rank 1 ended step 3 after 7 all-reduces; the others' 8, or the others gone)" \
    warn_seen skipw 1 3 7 8
tap_check "... and the rank says its deferred reductions were not completed" \
    grep -q 'coalescing: step 3: this rank ended the step with 7 deferred all-reduce(s) pending, and the other ranks did not end it alike' \
    "$CCS_TMP/skipw.err"

run extraw 15 4 --coalesce every:4 -- $A --inject extra-minibatch:2:3
tap_check "MPI every:4, 4 ranks, warn, rank 2 replays one more: DESYNC (with the others' count, or the others gone)" \
    warn_seen extraw 2 3 5 4

# --- MPI, healthy ------------------------------------------------------------
run ok2 120 2 --coalesce auto --on-desync abort -- --batch 32 --mini-batch 4 --steps 100; rc=$?
tap_eq "MPI auto, healthy, 100 steps: rc 0" 0 $rc
tap_eq "... no verdict of any kind" 0 "$(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/ok2.err")"
tap_eq "... coalesced: 7 of every 8 answered locally from step 2 (686 local and 98 real ones carrying them on rank 0)" \
    "686 98" "$(sed -n 's/^ccshim\[0@[^]]*\]: coalescing: \([0-9]*\) all-reduces answered locally, \([0-9]*\) real.*/\1 \2/p' "$CCS_TMP/ok2.err")"
run ok4 120 4 --coalesce every:4 --on-desync abort -- --batch 32 --mini-batch 4 --steps 100; rc=$?
tap_eq "MPI every:4, 4 ranks, healthy, 100 steps: rc 0, no verdict" "0 0" \
    "$rc $(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/ok4.err")"

# --- NCCL (test NCCL, asynchronous: calls return once queued) ----------------
TN="$top_builddir/ccshim-trainer-nccl"
if [ ! -x "$TN" ] || [ ! -f "$top_builddir/tests/nccl/libnccl.so.2" ] || [ ! -f "$top_builddir/tests/cuda/libcuda.so.1" ]; then
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13; do tap_skip "NCCL trainer case $i" "ccshim-trainer-nccl or the test NCCL not built"; done
    tap_done
    exit $?
fi
. "$top_srcdir/tests/nccl/lib.sh"
# njob NAME SECS [VAR=VALUE...] -- TRAINER-OPTIONS: 4 ranks started by hand
# (RANK/WORLD_SIZE, as torchrun would) marking their steps (tests/nccl/lib.sh);
# their logs together in $CCS_TMP/NAME.err.
njob() {
    local name=$1
    JOB_MARKS=1 job "$@"
    NJOB_LEFT=$JOB_TIMEOUTS
    NJOB_RCS=$JOB_RCS
    cat "$CCS_TMP/$name"/log-*.txt >"$CCS_TMP/$name.err" 2>/dev/null
}
NA="--batch 32 --mini-batch 4 --steps 8"
njob nskip 60 CCSHIM_COALESCE=auto CCSHIM_ON_DESYNC=abort -- $NA --inject skip-minibatch:1:3
tap_eq "NCCL auto, rank 1 skips in step 3: DESYNC with both counts" \
    "rank 1 ended step 3 after 3 all-reduces where the others made 4" "$(counts nskip)"
tap_check "... reported within 2 s of the others blocking on the device ($(blocked_s nskip) s)" within "$(blocked_s nskip)" 2.0
tap_eq "... every rank ended, none waited for the timeout" 0 "$NJOB_LEFT"
tap_eq "... no straggler" 0 "$(stragglers nskip)"

njob nextra 60 CCSHIM_COALESCE=every:4 CCSHIM_ON_DESYNC=abort -- $NA --inject extra-minibatch:2:3
tap_eq "NCCL every:4, rank 2 replays one more: DESYNC with both counts" \
    "rank 2 ended step 3 after 5 all-reduces where the others made 4" "$(counts nextra)"
tap_eq "... every rank ended" 0 "$NJOB_LEFT"

njob nskipw 12 CCSHIM_COALESCE=auto -- $NA --inject skip-minibatch:3:2
tap_check "NCCL auto, warn, rank 3 skips in step 2: DESYNC (with the others' count, or the others gone)" \
    warn_seen nskipw 3 2 3 4

njob nextraw 12 CCSHIM_COALESCE=every:4 -- $NA --inject extra-minibatch:0:3
tap_check "NCCL every:4, warn, rank 0 replays one more: DESYNC (with the others' count, or the others gone)" \
    warn_seen nextraw 0 3 5 4

njob nok 60 CCSHIM_COALESCE=auto CCSHIM_ON_DESYNC=abort CCSHIM_SUMMARY=1 -- --batch 32 --mini-batch 4 --steps 100
tap_eq "NCCL auto, healthy, 100 steps: every rank ended with status 0" " 0 0 0 0" "$NJOB_RCS"
tap_eq "... no verdict of any kind" 0 "$(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/nok.err")"
tap_eq "... coalesced: 3 of every 4 answered locally from step 2 on rank 0" "294 98" \
    "$(sed -n 's/^ccshim\[0@[^]]*\]: coalescing: \([0-9]*\) all-reduces answered locally, \([0-9]*\) real.*/\1 \2/p' "$CCS_TMP/nok.err")"

njob nhang 30 CCSHIM_ON_DESYNC=abort -- $NA --no-step-marks --inject skip-minibatch:1:3
tap_check "NCCL without step marks nor coalescing (the source report's hang): DESYNC naming rank 1 as before" \
    grep -q '^ccshim DESYNC .*rank 1 ' "$CCS_TMP/nhang.err"
tap_done
