#!/bin/sh
# tests/trainer/trainer-gradients.sh - the trainer's gradients are right:
# GradCache + buckets + communication equal the one-process full-batch
# reference (--check); per-minibatch sync equals per-step sync; W ranks with
# B/W rows equal one process with B rows for the global losses; the ring and
# the all-gather SigLIP agree; without compensation the gradient is W times
# too small and --check fails.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
tap_plan 30
T=$CCS_TMP
SMALL="--batch 48 --mini-batch 5 --columns 3 --dim-in 12 --dim-hidden 16 --dim-out 8"

# 1-8: --check on 3 ranks, every loss, both precisions (the last mini-batch
# of each column is partial: 16 rows per rank in mini-batches of 5).
for loss in mnrl mnrl-gather siglip-ring siglip-gather; do
    for prec in double single; do
        tr_run 3 "$T/check" $SMALL --steps 1 --loss "$loss" --precision "$prec" --check
        rc=$?
        err=$(sed -n 's/^check: max relative error \([^ ]*\) .*/\1/p' "$T/check")
        tap_check "--check $loss $prec: status 0, error $err" test "$rc" = 0 -a -n "$err"
    done
done

# 9-12: per-minibatch and per-step synchronisation give the same gradient
# and parameters, with one and with three buckets.
for loss in mnrl siglip-ring; do
    tr_run 3 "$T/a" $SMALL --steps 2 --loss "$loss" --sync per-minibatch --buckets 3 --dump-grad "$T/a.dump"
    tr_run 3 "$T/b" $SMALL --steps 2 --loss "$loss" --sync per-step --dump-grad "$T/b.dump"
    e=$(tr_dump_err "$T/a.dump" "$T/b.dump" grad)
    tap_check "$loss: per-minibatch = per-step gradient (rel. error $e)" tr_below "$e" 1e-12
    e=$(tr_dump_err "$T/a.dump" "$T/b.dump" param)
    tap_check "$loss: per-minibatch = per-step parameters (rel. error $e)" tr_below "$e" 1e-12
done

# 13-18: W ranks x B/W rows = one process x B rows (gradient of the last
# step and parameters after 2 Adam steps).
for loss in mnrl-gather siglip-ring siglip-gather; do
    tr_run 1 "$T/one" $SMALL --steps 2 --optimizer adam --loss "$loss" --dump-grad "$T/one.dump"
    tr_run 4 "$T/four" $SMALL --steps 2 --optimizer adam --loss "$loss" --dump-grad "$T/four.dump"
    e=$(tr_dump_err "$T/four.dump" "$T/one.dump" grad)
    tap_check "$loss: 4 ranks x 12 = 1 process x 48, gradient (rel. error $e)" tr_below "$e" 1e-10
    e=$(tr_dump_err "$T/four.dump" "$T/one.dump" param)
    tap_check "$loss: 4 ranks x 12 = 1 process x 48, parameters (rel. error $e)" tr_below "$e" 1e-10
done

# 19-20: the ring and the all-gather SigLIP compute bit-identical gradients.
tr_run 4 "$T/ring" $SMALL --steps 2 --loss siglip-ring --dump-grad "$T/ring.dump"
tr_run 4 "$T/gath" $SMALL --steps 2 --loss siglip-gather --dump-grad "$T/gath.dump"
tail -n +2 "$T/ring.dump" >"$T/ring.vals"; tail -n +2 "$T/gath.dump" >"$T/gath.vals"
tap_check "siglip ring = all-gather, bit for bit" cmp -s "$T/ring.vals" "$T/gath.vals"
tap_eq "siglip ring: 3 sends, 3 receives, 0 all-gathers per rank per step" "6 6 0" \
    "$(tr_json "$T/ring" send) $(tr_json "$T/ring" recv) $(tr_json "$T/ring" allgather)"

# 21-24: without compensation, the gathered InfoNCE gradient is W times too
# small, and --check catches it.
for np in 2 4; do
    tr_run "$np" "$T/comp" $SMALL --steps 1 --loss mnrl-gather --dump-grad "$T/comp.dump"
    tr_run "$np" "$T/nocomp" $SMALL --steps 1 --loss mnrl-gather --no-compensation --dump-grad "$T/nocomp.dump"
    e=$(tr_dump_err "$T/nocomp.dump" "$T/comp.dump" grad "$np")
    tap_check "no compensation on $np ranks: gradient x $np = compensated gradient (rel. error $e)" tr_below "$e" 1e-12
    tr_run "$np" "$T/nocheck" $SMALL --steps 1 --loss mnrl-gather --no-compensation --check
    rc=$?
    err=$(sed -n 's/^check: max relative error \([^ ]*\) .*FAIL$/\1/p' "$T/nocheck")
    want=$(awk -v w="$np" 'BEGIN { printf "%.3e", 1 - 1 / w }')
    tap_eq "no compensation on $np ranks: --check fails with error 1 - 1/$np" "nonzero $want" \
        "$([ "$rc" -ne 0 ] && echo nonzero || echo zero) $err"
done

# 25-28: the trainer's own count of reductions per step:
# (sum over columns of ceil(b/m)) x buckets, or buckets.
tr_run 2 "$T/pm" $SMALL --steps 2 --buckets 2
tap_eq "per-minibatch: 3 columns x ceil(24/5) x 2 buckets per step" "30 60" \
    "$(tr_json "$T/pm" reductions_per_step) $(tr_json "$T/pm" allreduce)"
tr_run 2 "$T/ps" $SMALL --steps 2 --buckets 2 --sync per-step
tap_eq "per-step: 2 buckets per step" "2 4" "$(tr_json "$T/ps" reductions_per_step) $(tr_json "$T/ps" allreduce)"
tr_run 2 "$T/cap" $SMALL --steps 1 --bucket-cap-mb 0.001
tap_eq "a 0.001 MiB bucket cap makes 2 buckets (DDP assignment by tensors)" "2" "$(tr_json "$T/cap" buckets)"
tr_run 2 "$T/oop" $SMALL --steps 2 --sync per-step --out-of-place --dump-grad "$T/oop.dump"
tr_run 2 "$T/inp" $SMALL --steps 2 --sync per-step --dump-grad "$T/inp.dump"
tap_check "out-of-place all-reduce = in place, bit for bit" cmp -s "$T/oop.dump" "$T/inp.dump"

# 29-30: the same run twice gives the same checksum (determinism), another
# seed another one.
tr_run 2 "$T/s1" $SMALL --steps 2 --seed 5
tr_run 2 "$T/s2" $SMALL --steps 2 --seed 5
tr_run 2 "$T/s3" $SMALL --steps 2 --seed 6
tap_eq "same seed, same checksum" "$(tr_json "$T/s1" checksum)" "$(tr_json "$T/s2" checksum)"
tap_check "another seed, another checksum" test "$(tr_json "$T/s1" checksum)" != "$(tr_json "$T/s3" checksum)"
tap_done
