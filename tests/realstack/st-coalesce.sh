#!/bin/sh
# st-coalesce.sh - `ccshim-run --torch --coalesce auto` on the real
# SentenceTransformerTrainer + CachedMultipleNegativesRankingLoss (2 ranks,
# per-device batch 64, mini_batch_size 8, 2 columns; a 2-layer BERT of width
# 32 made from a config with MiniLM's tokenizer, so that 6 optimizer steps
# take seconds), with the Trainer's max_grad_norm (clip_grad_norm_), a linear
# warm-up scheduler and gradient_accumulation_steps=2 (accelerate runs the
# first micro-batch under no_sync()).  Without coalescing: 16 reductions of
# each bucket per optimizer step.  auto learns in steps 0 and 1; from step 3
# on each bucket gets exactly one real reduction per step (15 answered
# locally); the parameters end bitwise equal across the ranks and within
# 1e-5 of the run without coalescing; one step marked per optimizer step.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 9
JOB="--model tiny --steps 6 --batch 64 --mini-batch 8 --grad-accum 2 --max-grad-norm 1.0 --warmup-steps 2"

rs ref 2 -- trainer_job.py --out "$CCS_TMP/ref" $JOB --save "$CCS_TMP/ref.npy"
tap_eq "without coalescing: runs, 6 optimizer steps, ranks equal" "0 6 1" \
    "$? $(val ref optimizer_steps) $(val ref ranks_equal)"
B=$(val ref buckets)
tap_eq "without coalescing: 16 all-reduces of each of the $B buckets per optimizer step, all real" \
    "$(expect_steps 0 5 2 $((16 * ${B:-0})) 0)" "$(per_step ref)"

rs auto 2 --coalesce auto -- trainer_job.py --out "$CCS_TMP/auto" $JOB --ref "$CCS_TMP/ref.npy"
tap_eq "--coalesce auto: runs, 6 optimizer steps" "0 6" "$? $(val auto optimizer_steps)"
tap_eq "auto: steps 0 and 1 (learning) all real" "$(expect_steps 0 1 2 $((16 * B)) 0)" \
    "$(per_step auto | awk '$1 <= 1')"
echo "# auto, step 2: $(per_step auto | awk '$1 == 2' | tr '\n' ';')"
tap_eq "auto: from step 3 on one real reduction per bucket per step (15 answered locally), every rank" \
    "$(expect_steps 3 5 2 "$B" $((15 * B)))" "$(per_step auto 3)"
tap_eq "auto: parameters bitwise equal across ranks, within 1e-5 of the run without coalescing" \
    "ranks_equal 1, within 1e-5" "$(close auto)"
echo "# auto: largest parameter difference to the run without coalescing: $(val auto maxdiff)"
tap_eq "one step marked per optimizer step (6 on each rank)" 2 "$(grep -c 'summary: .*, 6 steps,' "$CCS_TMP/auto.err")"
# the closing line, as it stands, its numbers those of the traces
D=$(per_step auto | awk -v r=0 '$2==0 {d+=$4} END {print d+0}')
R=$(per_step auto | awk '$2==0 && $4 > 0 {r+=$3} END {print r+0}')
tap_check "the closing line: coalescing: $D all-reduces answered locally, $R real ones carrying them" \
    grep -q "^ccshim\[0@[^]]*\]: coalescing: $D all-reduces answered locally, $R real ones carrying them" \
    "$CCS_TMP/auto.err"
tap_eq "the Trainer's gradient clipping and warm-up ran (no gradient left unreduced: no repair)" 0 \
    "$(grep -c 'pending before' "$CCS_TMP/auto.err")"
tap_done
