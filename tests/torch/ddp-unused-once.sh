#!/bin/sh
# ddp-unused-once.sh - a DDP model with find_unused_parameters=True under
# ccshim's all-reduce-level coalescing (tests/torch/ddp_job.py, Debian's
# torch 1.13): the helper averages its gradients itself (DDP does not copy a
# reduced bucket into an unused parameter's .grad), once per step although
# both clip_grad_norm_ and the optimizer step read them, after the ranks
# agreed they ended the step alike; its line says what that costs.  Before,
# every step averaged twice (16 all-reduces in 8 steps) and the line said
# "one extra all-reduce per step".
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 3
J="--batch 64 --minibatch 8 --steps 8 --find-unused --clip 1.0"

ddp ref 2 -- $J --save "$CCS_TMP/ref.npy"
ddp once 2 --coalesce auto --torch-ddp-skip 0 -- $J --ref "$CCS_TMP/ref.npy"
tap_eq "find_unused_parameters=True, clip_grad_norm_, all-reduce-level coalescing: runs, parameters" \
    "0 ranks_equal 1, within 1e-5" "$? $(close once)"
tap_eq "... the gradients averaged once per step (8 steps)" 8 "$(val once dist_all_reduces)"
tap_eq "... and the line says what it costs, once per rank" 2 \
    "$(grep -c 'averaged once in every step that ccshim coalesces itself, before the first of clip_grad_norm_, GradScaler and the optimizer step reads them: one extra all-reduce of 2128 values (0.009 MB) per step, after the ranks agreed they ended the step alike' "$CCS_TMP/once.err")"
