#!/bin/sh
# ddp-warning.sh - a warning raised inside the DistributedDataParallel
# constructor at its caller (stacklevel=2, as torch 2.x's broadcast_buffers
# FutureWarning) names the job's line under `ccshim-run --torch`, as without
# ccshim (tests/torch/warn_job.py, one rank on gloo, Debian's torch 1.13).
# Before, it named ccshim_torch.py's wrapper of the constructor.
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 2
JOB=$top_srcdir/tests/torch/warn_job.py
LINE=$(grep -n "# the caller's line" "$JOB" | cut -d: -f1)
warning() { grep 'FutureWarning: a torch FutureWarning raised in the DDP constructor' "$CCS_TMP/$1.err" | sed 's|.*/||'; }
PORT=$(ccs_ports 1) ccs_run_timeout 60 "$TORCH_PY" "$JOB" > "$CCS_TMP/plain.out" 2> "$CCS_TMP/plain.err"
tap_eq "without ccshim: the warning names the job's line" \
    "0 warn_job.py:$LINE: FutureWarning: a torch FutureWarning raised in the DDP constructor" "$? $(warning plain)"
PORT=$(ccs_ports 1) ccs_run_timeout 60 "$CCSHIM_RUN" --torch -- "$TORCH_PY" "$JOB" > "$CCS_TMP/torch.out" 2> "$CCS_TMP/torch.err"
tap_eq "under --torch: the same line, once, not ccshim_torch.py's" \
    "0 warn_job.py:$LINE: FutureWarning: a torch FutureWarning raised in the DDP constructor" "$? $(warning torch)"
