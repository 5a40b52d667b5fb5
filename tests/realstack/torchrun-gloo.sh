#!/bin/sh
# torchrun-gloo.sh - a CPU DDP job under torchrun, its process group on gloo
# (which ccshim does not intercept), torch 2.13's torchrun: ccshim says so
# once, at the end, from rank 0, with what it covers, and ccshim-audit
# reports "no collectives recorded" with the reason the traces give, never
# an all-clear; under --torch its steps come from the 5 step marks.  Before,
# the first job recorded nothing and said nothing, and under --torch the
# audit found "1 steps" and "none: every rank made the same calls".  Last,
# tests/torch/ddp_job.py (gloo for the set-up, the buckets through MPI):
# one note that gloo's collectives were not recorded, the MPI ones were.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
[ -x "$RS_VENV/bin/torchrun" ] || tap_skip_all "real-stack tier: no $RS_VENV/bin/torchrun"
tap_plan 7
JOB=$RS_DIR/gloo_job.py
GUESS="warning: no collective of this PyTorch job reached ccshim: ccshim intercepts MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl backend), not torch.distributed's gloo (its CPU backend), so nothing was recorded, checked for desync or coalesced"
NAMED="warning: this job's torch.distributed process group runs on gloo, which ccshim does not intercept: no collective reached ccshim, so nothing was recorded, checked for desync or coalesced but what the torch helper sees of torch.distributed's Python API (its calls counted, the one a rank waits in named); ccshim covers MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl backend)"
# trun NAME [ccshim-run options]: torchrun --nproc-per-node 2 under ccshim-run, traces in NAME.tr
trun() {
    local name=$1
    shift
    ccs_run_timeout 120 "$CCSHIM_RUN" --trace-dir "$CCS_TMP/$name.tr" "$@" -- "$RS_VENV/bin/torchrun" \
        --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$(ccs_ports 1)" "$JOB" \
        > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    local rc=$?
    [ $rc = 0 ] || { echo "# $name: exit $rc"; tail -n 8 "$CCS_TMP/$name.err" | tap_diag; }
    return $rc
}
# lines NAME TEXT: "RANKS COUNT" of the ccshim lines ending in TEXT (or
# holding it, followed by " (docs/..."), with the ranks that wrote them
lines() { grep -F "$2" "$CCS_TMP/$1.err" | sed -n 's/^ccshim\[\([-0-9]*\)@.*/\1/p' | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }
audit() { "$CCSHIM_AUDIT" "$CCS_TMP/$1.tr" 2>&1; }
# has NAME TEXT: 1 when the audit's output, its wrapped lines joined, holds TEXT, else 0
has() { audit "$1" | sed 's/^ *//' | tr '\n' ' ' | grep -cF "$2"; }

trun plain
tap_eq "ccshim-run -- torchrun on gloo: runs; one line at the end, from rank 0, saying that nothing reached ccshim and what it covers" \
    "0 steps 5 0:1 " "$? $(cat "$CCS_TMP/plain.out") $(lines plain "$GUESS")"
tap_eq "... the audit: 'no collectives recorded' (a PyTorch job, the traces of both ranks say so), no all-clear" \
    "1 1 0" "$(has plain '1. [warning] no collectives recorded: a PyTorch job whose collectives did not reach ccshim') $(has plain 'the traces of ranks 0-1 say so') $(has plain 'none: every rank made the same calls')"

trun torch --torch --coalesce auto
tap_eq "--torch --coalesce auto: runs; the helper names gloo: one line at the end, from rank 0; no other says it" \
    "0 0:1 " "$? $(lines torch "$NAMED")"
# (6 steps: the job's barrier after its 5 marked steps, which the torch
# helper counts, is in step 5; with the helper's own all_gather of step 0
# under --coalesce auto, 2 calls per rank.)
tap_eq "... the audit: 6 steps from the step marks, 'no collectives recorded' naming gloo, the barrier and the helper's all_gather counted, no all-clear" \
    "1 1 1 0" "$(audit torch | grep -c '^steps: from step markers, 6 steps$') $(has torch "1. [warning] no collectives recorded: the job's torch.distributed process group runs on gloo, which ccshim does not intercept") $(has torch '4 torch.distributed calls counted by the torch helper (kinds and steps only)') $(has torch 'none: every rank made the same calls')"
tap_eq "... the traces record it: uncovered=gloo in both" \
    "2" "$(cat "$CCS_TMP"/torch.tr/*.cctrace | tr '\0' '\n' | grep -c '^uncovered=gloo$')"

# gloo for the set-up, DDP's buckets through MPI (the tests' comm hook)
ddp hooked 2 --coalesce off -- --batch 16 --minibatch 4 --steps 3
tap_eq "gloo set-up, buckets through MPI: runs; one note from rank 0 that gloo's collectives were not recorded" \
    "0 0:1 " "$? $(lines hooked "this job's torch.distributed process group runs on gloo, which ccshim does not intercept: its collectives were not recorded, checked for desync or coalesced, only those through MPI and NCCL (the torch helper counts the calls of torch.distributed's Python API in the trace, and names the one a rank waits in)")"
tap_eq "... the audit: an info finding saying so, the MPI all-reduces counted" \
    "1 0" "$(has hooked "[info] only the collectives through MPI and NCCL were recorded: the job's torch.distributed process group runs on gloo, which ccshim does not intercept") $(has hooked 'none: every rank made the same calls')"
tap_done
