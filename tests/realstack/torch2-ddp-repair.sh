#!/bin/sh
# torch2-ddp-repair.sh - tests/torch/ddp-repair.sh (the helper's repairs:
# every:N with step 0's bucket rebuild, a wrong every:N, a short last batch
# under auto; two AdamW optimizers with lr schedulers, a deep-copied optimizer
# stepped through GradScaler, step(closure)) on torch 2.13 instead of
# Debian's torch 1.13: the global optimizer step pre-hook (which also carries
# the closure) and torch.amp.GradScaler, enabled on the CPU.
. "$top_srcdir/tests/realstack/torch2.sh"
torch2_run ddp-repair.sh
