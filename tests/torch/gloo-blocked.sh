#!/bin/sh
# gloo-blocked.sh - a rank blocked in a torch.distributed collective on gloo
# (which ccshim does not intercept) while the other waits in an MPI
# all-reduce (tests/torch/foreign_job.py, Debian's torch 1.13): under --torch
# the helper says the rank is inside the gloo call, and past the block
# threshold it is a DESYNC naming both ranks, the gloo call and its Python
# line; under --on-desync abort the job ends in seconds.  Before, the rank
# looked computing: a STRAGGLER warning after 5 s and the job hung.  A rank
# waiting in a gloo barrier while the other computes gets no verdict.
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 5
JOB=$top_srcdir/tests/torch/foreign_job.py
# run NAME JOB ARGS: the job on 2 ranks under ccshim-run --mpi --torch --on-desync abort
run() {
    local name=$1
    shift
    ccs_mpirun 60 2 "$CCSHIM_RUN" --mpi --torch --on-desync abort -- "$TORCH_PY" "$JOB" "$@" \
        > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
}
# verdict NAME: the first DESYNC line, its comm id and times left out
verdict() {
    grep '^ccshim DESYNC' "$CCS_TMP/$1.err" | head -n 1 |
        sed -e 's/ \[seen by .*//' -e 's/comm=0x[0-9a-f]*/comm=C/' -e 's/for [0-9.]* s/for T s/g'
}
blocked_s() { grep '^ccshim DESYNC' "$CCS_TMP/$1.err" | head -n 1 | sed -n 's/.* at seq [0-9]* for \([0-9.]*\) s;.*/\1/p'; }
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
ended() { [ "$1" -ne 0 ] && [ "$1" -ne 124 ] && [ "$1" -ne 125 ] && echo 1; }
GATHER=$(grep -n 'dist.all_gather(\[torch.zeros' "$JOB" | cut -d: -f1)
BARRIER=$(grep -n '^            dist.barrier()' "$JOB" | cut -d: -f1)

run gather --shape deadlock; rc=$?
tap_eq "rank 1 in a gloo all_gather, rank 0 in an MPI all-reduce: a DESYNC naming both and the gloo call's line" \
    "ccshim DESYNC comm=C size=2 seq=4: rank 0 blocked in allreduce(count=4, float32, sum) at seq 4 for T s; rank 1 at seq 3 (1 behind, not in it: in torch.distributed.all_gather (gloo) at foreign_job.py:$GATHER in gloo_call for T s)" \
    "$(verdict gather)"
tap_eq "... within 2 s of rank 0 blocking ($(blocked_s gather) s), the job ended (rc $rc), no straggler" "1 1 0" \
    "$(within "$(blocked_s gather)" 2.0 && echo 1) $(ended $rc) $(grep -c '^ccshim STRAGGLER' "$CCS_TMP/gather.err")"

run barrier --shape deadlock --call barrier; rc=$?
tap_eq "rank 1 in a gloo barrier: the same DESYNC naming the barrier, the job ended (rc $rc)" \
    "ccshim DESYNC comm=C size=2 seq=4: rank 0 blocked in allreduce(count=4, float32, sum) at seq 4 for T s; rank 1 at seq 3 (1 behind, not in it: in torch.distributed.barrier (gloo) at foreign_job.py:$BARRIER in gloo_call for T s) 1" \
    "$(verdict barrier) $(ended $rc)"

run healthy --shape healthy --call barrier --compute 3; rc=$?
tap_eq "rank 1 waits 3 s in a gloo barrier while rank 0 computes: runs" "0 done" "$rc $(cat "$CCS_TMP/healthy.out")"
tap_eq "... no verdict of any kind" 0 "$(grep -c '^ccshim [A-Z]* comm=' "$CCS_TMP/healthy.err")"
