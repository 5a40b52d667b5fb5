#!/bin/sh
# torch2-ddp-repair.sh - tests/torch/ddp-repair.sh (the helper's repairs:
# every:N with step 0's bucket rebuild, a wrong every:N, a short last batch
# under auto; two AdamW optimizers with lr schedulers, a deep-copied optimizer
# stepped through GradScaler, step(closure)) on torch 2.13 from the tier's
# virtual environment instead of Debian's torch 1.13: ccshim_torch's
# torch >= 2.0 paths (the global optimizer step pre-hook, which also carries
# the closure; torch.amp.GradScaler, enabled on the CPU there).  Skipped, with
# the reason, where the environment could not be made.
: "${top_srcdir:?tests must run under make check (top_srcdir unset)}"
venv=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st}
if [ ! -x "$venv/bin/python" ]; then
    why="no $venv (scripts/setup.sh makes it with scripts/realstack-venv.sh)"
    [ -f "$venv.status" ] && why="$(sed -n '1s/^skip: //p' "$venv.status") ($venv.status)"
    echo "1..0 # SKIP real-stack tier: $why"
    exit 0
fi
TORCH_PYTHON=$venv/bin/python
export TORCH_PYTHON
exec sh "$top_srcdir/tests/torch/ddp-repair.sh"
