#!/bin/sh
# tests/trainer/trainer-inject.sh - the fault injections do what a real job
# would suffer: a skipped mini-batch or an extra all-reduce leaves one rank a
# collective behind or ahead and the job hangs (killed here after a timeout);
# with per-step sync a skipped mini-batch only corrupts the gradient; a wrong
# count corrupts the reduction silently.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
tap_plan 8
T=$CCS_TMP
A="--batch 48 --mini-batch 5 --steps 1 --print-all-ranks"

# 8 reductions per step: 2 columns x ceil(16 / 5).  Rank 1 skips one.
ccs_mpirun 10 3 "$CCSHIM_TRAINER" $A --inject skip-minibatch:1:0 >"$T/skip" 2>&1
tap_eq "skip-minibatch, per-minibatch sync: the job hangs" 124 $?
tap_eq "... after rank 1 issued 7 reductions" "allreduce 7" \
    "$(sed -n 's/^step 0 rank 1 .*\(allreduce [0-9]*\) .*/\1/p' "$T/skip")"
tap_eq "... and no other rank finished the step" "" "$(grep '^step 0 rank [02] ' "$T/skip")"

ccs_mpirun 10 3 "$CCSHIM_TRAINER" $A --sync per-step --inject extra-allreduce:2:0 >"$T/extra" 2>&1
tap_eq "extra-allreduce: the job hangs" 124 $?
# Rank 2's extra reduction met the others' step reduction: ranks 0 and 1
# finished step 0 with 1 reduction each, rank 2 never did.
tap_eq "... ranks 0 and 1 finished step 0 with 1 reduction, rank 2 did not" "0 1;1 1;" \
    "$(sed -n 's/^step 0 rank \([0-9]\) .*allreduce \([0-9]*\) .*/\1 \2/p' "$T/extra" | sort | tr '\n' ';')"

ccs_mpirun 30 3 "$CCSHIM_TRAINER" $A --sync per-step --inject skip-minibatch:1:0 --check >"$T/ps" 2>&1
tap_eq "skip-minibatch, per-step sync: no hang, --check fails (status 1)" 1 $?

ccs_mpirun 30 3 "$CCSHIM_TRAINER" $A --sync per-step --inject wrong-count:1:0 --check >"$T/wc" 2>&1
tap_eq "wrong-count: no hang, --check fails (status 1)" 1 $?
n=$(sed -n 's/^step 0 rank [0-9] .*grad_norm \([^ ]*\) .*/\1/p' "$T/wc" | sort -u | wc -l)
tap_eq "... and the ranks now hold different gradients" 3 "$n"
tap_done
