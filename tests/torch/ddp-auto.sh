#!/bin/sh
# ddp-auto.sh - CCSHIM_COALESCE=auto on real PyTorch DistributedDataParallel
# (CPU, Debian's torch, buckets all-reduced through MPI by a comm hook,
# tests/torch/ddp_job.py) with a GradCache-style cached loss over 2 columns:
# DDP rebuilds its buckets during step 0 (new buffers mid-step), auto learns
# steps 1 and 2 and from step 3 on each bucket gets exactly one real
# reduction per step; the parameters equal the per-mini-batch run's within
# 1e-5 and are bitwise equal across the ranks.  2 and 4 ranks, several
# buckets, gradient_as_bucket_view, static_graph, find_unused_parameters
# (its integer reductions are never deferred), and the source report's
# sizes (batch 1024, mini-batch 32: 64 reductions per bucket per step -> 1).
. "$top_srcdir/tests/torch/lib.sh"
torch_require
# ccshim's all-reduce-level coalescing, which the helper's DDP skipping
# (tests/torch/ddp-skip.sh) replaces once a pattern is agreed: kept off here.
DDP_SETS="--torch-ddp-skip 0"
tap_plan 19
AUTO="--set CCSHIM_COALESCE=auto"

# 1. The source report's numbers, a tiny model in one bucket.
# (1864 parameters: above CCSHIM_COALESCE_MIN_BYTES)
SEED="--batch 1024 --minibatch 32 --steps 5"
ddp seedref 2 -- $SEED --save "$CCS_TMP/seed.npy"
ddp seed 2 $AUTO -- $SEED --ref "$CCS_TMP/seed.npy"
tap_eq "seed sizes, auto: the job runs, 64 bucket reductions per step" "0 1 64" "$? $(val seed buckets) $(val seed last_step_hook_calls)"
# Step 2 is learned or already coalesced: when the rebuilt bucket reuses the
# freed buffer's address, its identity was seen whole from step 0.
tap_eq "seed sizes: 64 real in step 1 (learning), from step 3 on 64 -> 1 per step, every rank" \
    "$(expect_steps 1 1 2 64 0; expect_steps 3 4 2 1 63)" "$(per_step seed 1 | awk '$1 != 2')"
tap_eq "seed sizes: parameters equal across ranks and to the per-mini-batch run's" \
    "ranks_equal 1, within 1e-5" "$(close seed)"

# 2. Several buckets, 2 ranks.
ddp ref2 2 -- $BUCKETS --save "$CCS_TMP/ref2.npy"
tap_eq "per-mini-batch reference, several buckets: runs, ranks equal" "0 1" "$? $(val ref2 ranks_equal)"
B=$(val ref2 buckets)
tap_check "the model is in several buckets after the rebuild ($B)" test "${B:-0}" -ge 2
ddp auto2 2 $AUTO -- $BUCKETS --ref "$CCS_TMP/ref2.npy"
tap_eq "auto, 2 ranks: runs" 0 $?
tap_eq "auto, 2 ranks: from step 3 on exactly one real reduction per bucket per step" \
    "$(expect_steps 3 5 2 "$B" $((B * 15)))" "$(per_step auto2 3)"
tap_eq "auto, 2 ranks: step 0 (the rebuild) has the first layout's reductions, all real" \
    0 "$(per_step auto2 | awk '$1==0 {d+=$4} END {print d+0}')"
tap_eq "auto, 2 ranks: parameters" "ranks_equal 1, within 1e-5" "$(close auto2)"

# 3. static_graph=True (DDP rebuilds its buckets too).
ddp static 2 $AUTO -- $BUCKETS --static-graph --ref "$CCS_TMP/ref2.npy"
tap_eq "static_graph=True: one real reduction per bucket per step from step 3" \
    "$(expect_steps 3 5 2 "$B" $((B * 15)))" "$(per_step static 3)"
tap_eq "static_graph=True: parameters" "ranks_equal 1, within 1e-5" "$(close static)"

# 4. Four ranks (oversubscribed), gradient_as_bucket_view=True.
ddp ref4 4 -- $BUCKETS --save "$CCS_TMP/ref4.npy"
ddp auto4 4 $AUTO -- $BUCKETS --grad-as-bucket-view --ref "$CCS_TMP/ref4.npy"
tap_eq "auto, 4 ranks, gradient_as_bucket_view: runs" 0 $?
tap_eq "auto, 4 ranks: from step 3 on exactly one real reduction per bucket per step" \
    "$(expect_steps 3 5 4 "$B" $((B * 15)))" "$(per_step auto4 3)"
tap_eq "auto, 4 ranks: parameters" "ranks_equal 1, within 1e-5" "$(close auto4)"

# 5. find_unused_parameters=True: one head per column, so every backward
# leaves a head unused; DDP does not rebuild.  The job also all-reduces an
# int32 bitmap through MPI after every backward (as DDP does on NCCL).
ddp refu 2 -- --find-unused --save "$CCS_TMP/refu.npy"
ddp unused 2 $AUTO -- --find-unused --ref "$CCS_TMP/refu.npy"
tap_eq "find_unused_parameters=True: runs" 0 $?
tap_eq "find_unused_parameters=True: one real reduction per bucket per step from step 3" \
    "$(expect_steps 3 5 2 1 15)" "$(per_step unused 3)"
tap_eq "find_unused_parameters=True: the integer bitmap reductions all real and right (16 per step)" \
    "bitmap_wrong 0, real $((2 * 6 * 16)), deferred 0" \
    "bitmap_wrong $(val unused bitmap_wrong), $("$CCSHIM_AUDIT" --tsv-records "$CCS_TMP/unused.tr" 2>/dev/null |
        awk -F'\t' '$4=="allreduce" && $6=="int32" { if ($11 ~ /deferred/) d++; else r++ }
                    END { printf "real %d, deferred %d", r, d }')"
tap_eq "find_unused_parameters=True: parameters (the helper averages .grad of the unused heads)" \
    "ranks_equal 1, within 1e-5" "$(close unused)"
tap_check "  ... and says why, once per rank" test \
    "$(grep -c 'find_unused_parameters=True and gradient_as_bucket_view=False under coalescing' "$CCS_TMP/unused.err")" = 2
tap_done
