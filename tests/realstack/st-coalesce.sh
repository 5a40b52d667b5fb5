#!/bin/sh
# st-coalesce.sh - `ccshim-run --torch --coalesce auto` on the real
# SentenceTransformerTrainer + CachedMultipleNegativesRankingLoss (2 ranks,
# per-device batch 64, mini_batch_size 8, 2 columns; a 2-layer BERT of width
# 32 made from a config with MiniLM's tokenizer, so that 6 optimizer steps
# take seconds), with the Trainer's max_grad_norm (clip_grad_norm_), a linear
# warm-up scheduler, gradient_accumulation_steps=2 (accelerate runs the
# first micro-batch under no_sync()).  Without coalescing: 16 reductions of
# each bucket per optimizer step.  Under auto the loss's 16 no-grad forwards
# (its cached embedding) announce the step's 16 backward passes, the ranks
# agree on that, and from step 0 DDP itself skips the synchronisation of all
# but the 16th backward of each step (the torch helper, as no_sync), so each
# bucket gets exactly one real reduction per step and nothing is answered
# locally; with
# --torch-ddp-skip 0 ccshim coalesces the all-reduces instead (from step 3
# one real, 15 answered locally).  Either way the parameters end bitwise
# equal across the ranks and within 1e-5 of the run without coalescing;
# one step marked per optimizer step.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 20
JOB="--model tiny --steps 6 --batch 64 --mini-batch 8 --grad-accum 2 --max-grad-norm 1.0 --warmup-steps 2
     --lr 2e-3"

rs ref 2 -- trainer_job.py --out "$CCS_TMP/ref" $JOB --save "$CCS_TMP/ref.npy"
tap_eq "without coalescing: runs, 6 optimizer steps, ranks equal" "0 6 1" \
    "$? $(val ref optimizer_steps) $(val ref ranks_equal)"
B=$(val ref buckets)
tap_eq "the Trainer warmed up (linear, 2 steps) and clipped: lr per step, accelerate's clip_grad_norm_ once per step" \
    "0,0.001,0.002,0.0015,0.001,0.0005 6" "$(val ref lrs) $(val ref clip_calls)"
echo "# gradient norms before clipping (max_grad_norm 1.0): $(val ref grad_norms)"
tap_eq "without coalescing: 16 all-reduces of each of the $B buckets per optimizer step, all real" \
    "$(expect_steps 0 5 2 $((16 * ${B:-0})) 0)" "$(per_step ref)"

rs auto 2 --coalesce auto -- trainer_job.py --out "$CCS_TMP/auto" $JOB --ref "$CCS_TMP/ref.npy"
tap_eq "--coalesce auto: runs, 6 optimizer steps" "0 6" "$? $(val auto optimizer_steps)"
tap_eq "auto: the helper engaged from the first step on each rank (the loss's 16 no-grad forwards announced 16 backward passes)" 2 \
    "$(grep -c 'DDP synchronises once per step from the first step (at the 16-th backward)' "$CCS_TMP/auto.err")"
tap_eq "auto: from step 0 on one real reduction per bucket per step and nothing answered locally (DDP skipped 15 synchronisations), every rank" \
    "$(expect_steps 0 5 2 "$B" 0)" "$(per_step auto)"
tap_eq "auto: parameters bitwise equal across ranks, within 1e-5 of the run without coalescing" \
    "ranks_equal 1, within 1e-5" "$(close auto)"
echo "# auto: largest parameter difference to the run without coalescing: $(val auto maxdiff)"
tap_eq "one step marked per optimizer step (6 on each rank)" 2 "$(grep -c 'summary: .*, 6 steps,' "$CCS_TMP/auto.err")"
# the closing line: 15 avoided per bucket in each of steps 0-5, by the helper
tap_check "the closing line: coalescing: $((90 * B)) all-reduces answered locally, $((6 * B)) real ones carrying them; all avoided by the torch helper" \
    grep -q "^ccshim\[0@[^]]*\]: coalescing: $((90 * B)) all-reduces answered locally, $((6 * B)) real ones carrying them, .*; $((90 * B)) of them avoided by the torch helper" \
    "$CCS_TMP/auto.err"
tap_eq "auto: the same learning rates and gradient norms as without coalescing" \
    "$(val ref lrs) $(val ref grad_norms)" "$(val auto lrs) $(val auto grad_norms)"
tap_eq "auto: nothing was pending at clip_grad_norm_ or at a step (no repair needed)" 0 \
    "$(grep -c 'pending before' "$CCS_TMP/auto.err")"
# The Trainer's DDP has find_unused_parameters=True: ccshim_torch averages
# its .grad once in each step ccshim coalesces itself (--torch-predict 0:
# steps 0 and 1; once, before get_total_norm, not again before the step:
# nothing was issued in between); not in the
# helper's steps, where DDP's one reduction is exact on torch 2.13 (as
# no_sync()), which are all of them here
tap_eq "auto: no gradients averaged through torch.distributed (none without coalescing either)" \
    "0 0" "$(val ref dist_all_reduces) $(val auto dist_all_reduces)"
rs learn 2 --coalesce auto --torch-predict 0 -- trainer_job.py --out "$CCS_TMP/learn" $JOB --ref "$CCS_TMP/ref.npy"
tap_eq "auto learning from synchronised steps (--torch-predict 0): steps 0 and 1 all real, then one real reduction per bucket per step; 2 averagings (once a step); parameters" \
    "0 $(expect_steps 0 1 2 $((16 * B)) 0 | tr '\n' ';')$(expect_steps 2 5 2 "$B" 0 | tr '\n' ';') 2 ranks_equal 1, within 1e-5" \
    "$? $(per_step learn | tr '\n' ';') $(val learn dist_all_reduces) $(close learn)"

rs autoar 2 --coalesce auto --torch-ddp-skip 0 -- trainer_job.py --out "$CCS_TMP/autoar" $JOB --ref "$CCS_TMP/ref.npy"
tap_eq "auto at the all-reduce level (--torch-ddp-skip 0): runs; from step 3 on one real reduction per bucket per step (15 answered locally)" \
    "0 $(expect_steps 3 5 2 "$B" $((15 * B)))" "$? $(per_step autoar 3)"
tap_eq "... parameters bitwise equal across ranks, within 1e-5 of the run without coalescing" \
    "ranks_equal 1, within 1e-5" "$(close autoar)"
D=$(per_step autoar | awk '$2==0 {d+=$4} END {print d+0}')
R=$(per_step autoar | awk '$2==0 && $4 > 0 {r+=$3} END {print r+0}')
tap_check "... the closing line, its numbers those of the traces: coalescing: $D all-reduces answered locally, $R real ones carrying them" \
    grep -q "^ccshim\[0@[^]]*\]: coalescing: $D all-reduces answered locally, $R real ones carrying them" \
    "$CCS_TMP/autoar.err"
tap_eq "... the same learning rates and gradient norms as without coalescing" \
    "$(val ref lrs) $(val ref grad_norms)" "$(val autoar lrs) $(val autoar grad_norms)"

# A wrong every:N (5; 16 per step): every step from 1 (under --torch step 0,
# DDP's bucket rebuild, is all real) ends with reductions pending
# when accelerate's clip_grad_norm_ reads the gradients (through
# torch.nn.utils.get_total_norm on torch 2.13): the helper averages them
# there, first, so the norms, the clipping and the parameters are right.
rs ev5 2 --set CCSHIM_COALESCE=every:5 -- trainer_job.py --out "$CCS_TMP/ev5" $JOB --ref "$CCS_TMP/ref.npy"
tap_eq "every:5: runs; every step but 0 repaired before get_total_norm, on each rank" "0 5 5" \
    "$? $(grep -c '^ccshim_torch\[0\]: step .* pending before get_total_norm: averaged' "$CCS_TMP/ev5.err") $(grep -c '^ccshim_torch\[1\]: step .* pending before get_total_norm: averaged' "$CCS_TMP/ev5.err")"
tap_eq "every:5: the gradient norms of the run without coalescing" "$(val ref grad_norms)" "$(val ev5 grad_norms)"
tap_eq "every:5: parameters" "ranks_equal 1, within 1e-5" "$(close ev5)"
tap_done
