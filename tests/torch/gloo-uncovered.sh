#!/bin/sh
# gloo-uncovered.sh - tests/realstack/torchrun-gloo.sh on Debian's torch 1.13
# (its torchrun fails under Python 3.11, so the two ranks are started as
# torchrun starts them: RANK, WORLD_SIZE, MASTER_ADDR/PORT): a CPU DDP job on
# gloo, which ccshim does not intercept.  Without --torch rank 0 says once that
# nothing reached ccshim; with --torch that the process group runs on gloo;
# the audit reports "no collectives recorded" with the reason, the steps from
# the 5 step marks, never an all-clear.  Before, nothing was said, and the
# audit found "1 steps" and "none: every rank made the same calls".
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 4
JOB=$top_srcdir/tests/realstack/gloo_job.py
# pair NAME [ccshim-run options]: the job's two ranks, each under ccshim-run
pair() {
    local name=$1
    shift
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(ccs_ports 1) WORLD_SIZE=2 ccs_run_timeout 120 sh -c '
        out=$1 pids="" rc=0; shift
        for r in 0 1; do RANK=$r LOCAL_RANK=$r "$@" > "$out.$r.out" 2> "$out.$r.err" & pids="$pids $!"; done
        for p in $pids; do wait "$p" || rc=$?; done
        exit $rc' sh "$CCS_TMP/$name" "$CCSHIM_RUN" --trace-dir "$CCS_TMP/$name.tr" "$@" -- "$TORCH_PY" "$JOB"
    local rc=$?
    cat "$CCS_TMP/$name.0.err" "$CCS_TMP/$name.1.err" > "$CCS_TMP/$name.err"
    [ $rc = 0 ] || { echo "# $name: exit $rc"; tail -n 8 "$CCS_TMP/$name.err" | tap_diag; }
    return $rc
}
# lines NAME TEXT: "RANK:COUNT " of the ccshim lines holding TEXT
lines() { grep -F "$2" "$CCS_TMP/$1.err" | sed -n 's/^ccshim\[\([-0-9]*\)@.*/\1/p' | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }
# has NAME TEXT: 1 when the audit's output, its wrapped lines joined, holds TEXT, else 0
has() { "$CCSHIM_AUDIT" "$CCS_TMP/$1.tr" 2>&1 | sed 's/^ *//' | tr '\n' ' ' | grep -cF "$2"; }

pair plain
tap_eq "two ranks on gloo under ccshim-run: run; one line from rank 0 at the end: nothing reached ccshim, what it covers" \
    "0 steps 5 0:1 " "$? $(cat "$CCS_TMP/plain.0.out") $(lines plain "warning: no collective of this PyTorch job reached ccshim: ccshim intercepts MPI (mpi4py, torch's mpi backend) and NCCL (torch's nccl backend), not torch.distributed's gloo")"
tap_eq "... the audit: 'no collectives recorded' (both traces say why), no all-clear" \
    "1 0" "$(has plain '1. [warning] no collectives recorded: a PyTorch job whose collectives did not reach ccshim (torch.distributed'"'"'s gloo, its CPU backend, is not intercepted) evidence: 2 traces, 0 collective and point-to-point records, 1 step; the traces of ranks 0-1 say so') $(has plain 'none: every rank made the same calls')"
pair torch --torch
tap_eq "--torch: runs; one line from rank 0 naming gloo" \
    "0 0:1 " "$? $(lines torch "warning: this job's torch.distributed process group runs on gloo, which ccshim does not intercept: no collective reached ccshim")"
# (6 steps: the job's barrier after its 5 marked steps, which the torch
# helper counts, is in step 5.)
tap_eq "... the audit: 6 steps from the step marks, 'no collectives recorded' naming gloo, the barrier counted, no all-clear" \
    "1 1 1 0" "$(has torch 'steps: from step markers, 6 steps') $(has torch "1. [warning] no collectives recorded: the job's torch.distributed process group runs on gloo") $(has torch '2 torch.distributed calls counted by the torch helper (kinds and steps only)') $(has torch 'none: every rank made the same calls')"
tap_done
