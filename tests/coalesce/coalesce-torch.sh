#!/bin/sh
# coalesce-torch.sh - `ccshim-run --torch` makes every torch.optim optimizer
# step call ccshim_step_mark, with no change to the job.  torch is not
# installed here: tests/coalesce/fake_torch is a tiny `torch` exposing the
# same hook registration API (register_optimizer_step_pre_hook), so the
# helper's logic is exercised, not torch itself.
. "$top_srcdir/tests/tap.sh"
PY=$(command -v python3 || true)
[ -n "$PY" ] || tap_skip_all "no python3"
[ -x "$CCSHIM_RUN" ] || tap_skip_all "ccshim-run not built"
tap_plan 8
job="$top_srcdir/tests/coalesce/torch_job.py"
PYTHONPATH="$top_srcdir/tests/coalesce/fake_torch"
PYTHONDONTWRITEBYTECODE=1 # nothing written into the source tree
export PYTHONPATH PYTHONDONTWRITEBYTECODE

"$CCSHIM_RUN" --no-mpi --torch -- "$PY" "$job" > "$CCS_TMP/t.out" 2> "$CCS_TMP/t.err"
tap_eq "--torch: the job runs" 0 $?
# The pre-hook marks before the optimizer's body runs: step i sees step i+1.
tap_eq "every optimizer step marked, before the optimizer runs" "seen 1 2 3" "$(grep '^seen' "$CCS_TMP/t.out")"
tap_eq "the job's results are unchanged" "params -0.5 0.5" "$(grep '^params' "$CCS_TMP/t.out")"
tap_check "the shim's summary counts 3 steps" grep -q "3 steps" "$CCS_TMP/t.err"

FAKE_TORCH_OLD=1 "$CCSHIM_RUN" --no-mpi --torch -- "$PY" "$job" > "$CCS_TMP/o.out" 2> "$CCS_TMP/o.err"
tap_eq "torch without the global hook API: each optimizer's step wrapped instead" "seen 1 2 3" \
    "$(grep '^seen' "$CCS_TMP/o.out")"

"$CCSHIM_RUN" --no-mpi -- "$PY" "$job" > "$CCS_TMP/n.out" 2> "$CCS_TMP/n.err"
tap_eq "without --torch nothing is marked" "seen 0 0 0" "$(grep '^seen' "$CCS_TMP/n.out")"

# The helper on the path but no shim preloaded: a warning, the job runs.
PYTHONPATH="$top_srcdir/tools/python:$PYTHONPATH" "$PY" "$job" > "$CCS_TMP/p.out" 2> "$CCS_TMP/p.err"
tap_eq "helper without the shim: the job runs unchanged" "0 params -0.5 0.5" "$? $(grep '^params' "$CCS_TMP/p.out")"
tap_check "  ... and says the steps are not marked" grep -q "libccshim is not preloaded" "$CCS_TMP/p.err"
tap_done
