#!/bin/sh
# tests/trainer/trainer-options.sh - bad options get a message naming the
# bad value and exit status 2; --help and --version exit 0.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
tap_plan 12
T=$CCS_TMP

# bad_opt NAME EXPECTED-MESSAGE-PART ARGS...: status 2 and the message, on
# one process (MPI singleton).
bad_opt() {
    local name=$1 want=$2; shift 2
    ccs_run_timeout 30 "$CCSHIM_TRAINER" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ "$rc" = 2 ] && grep -q -- "$want" "$T/err"; then tap_ok "$name"; else
        tap_not_ok "$name"; echo "#   status $rc, stderr:"; tap_diag <"$T/err"; fi
}
bad_opt "mini-batch larger than the batch" "--mini-batch 64 is larger than the per-rank batch 32" \
    --batch 32 --mini-batch 64
bad_opt "unknown loss" "invalid --loss 'cosine' (expected mnrl, mnrl-gather, siglip-ring or siglip-gather)" \
    --loss cosine
bad_opt "unknown sync" "invalid --sync 'never'" --sync never
bad_opt "bad precision" "invalid --precision 'half' (expected double or single)" --precision half
bad_opt "bad number" "invalid --steps 'x' (expected an integer >= 1)" --steps x
bad_opt "bad injection" "invalid --inject 'skip-minibatch:1'" --inject skip-minibatch:1
bad_opt "injection on a rank that does not exist" "names rank 3, but the world has 1 ranks" \
    --inject extra-allreduce:3:0
bad_opt "--no-compensation without gathering" "applies to --loss mnrl-gather only" --no-compensation
bad_opt "unknown option" "unknown or incomplete option '--bogus'" --bogus

# The world size is known only once MPI runs: 4 ranks, a batch of 10.
ccs_mpirun 60 4 "$CCSHIM_TRAINER" --batch 10 >"$T/out" 2>"$T/err"
rc=$?
tap_check "batch not divisible by the world size: status 2 (via mpirun $rc)" test "$rc" = 2
tap_check "... and says so" grep -q -- "--batch 10 is not divisible by the world size 4" "$T/err"
ccs_run_timeout 30 "$CCSHIM_TRAINER" --help >"$T/out" 2>&1 &&
    "$CCSHIM_TRAINER" --version | grep -q "^ccshim-trainer (ccshim) [0-9]"
tap_check "--help and --version exit 0" test $? = 0 -a -s "$T/out"
tap_done
