#!/bin/sh
# gloo-calls.sh - ranks blocked in different torch.distributed collectives of
# one gloo process group (which ccshim does not intercept;
# tests/torch/gloo_calls_job.py, Debian's torch 1.13).  The torch helper
# numbers each group's collectives and says which one a rank is in
# (ccshim_foreign_call): rank 0 in an all_reduce while rank 1 is in a gather
# at the same call of the group is a DESYNC naming both calls and their
# Python lines, and under --on-desync abort the job ends (exit 3) in seconds.
# Before, both ranks were "in a call not intercepted", as many as the group
# holds: no verdict, and the job hung.  No verdict when the calls match with
# one rank slow (1.5 s), when two ranks wait in calls of two different groups
# for a third, slow rank, or around all_gather_object (two gloo all_gathers
# inside, one call as the job wrote it).
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 5
JOB=$top_srcdir/tests/torch/gloo_calls_job.py
# run NAME NP ARGS: the job under ccshim-run --mpi --torch --on-desync abort
run() {
    local name=$1 np=$2
    shift 2
    ccs_mpirun 60 "$np" "$CCSHIM_RUN" --mpi --torch --on-desync abort -- "$TORCH_PY" "$JOB" "$@" \
        > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
}
# verdict NAME: the first DESYNC line, its group id and times left out
verdict() {
    grep '^ccshim DESYNC' "$CCS_TMP/$1.err" | head -n 1 |
        sed -e 's/ \[seen by .*//' -e 's/comm=0x[0-9a-f]*/comm=G/' -e 's/for [0-9.]* s/for T s/g'
}
# longest NAME: the longest time the DESYNC names a rank in its call
longest() {
    grep '^ccshim DESYNC' "$CCS_TMP/$1.err" | head -n 1 | grep -o 'for [0-9.]* s' |
        awk '{ if ($2 > m) m = $2 } END { print m }'
}
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
nverdicts() { grep -c '^ccshim [A-Z]* comm=' "$CCS_TMP/$1.err"; }
REDUCE=$(grep -n 'dist.all_reduce(x)  # the all_reduce' "$JOB" | cut -d: -f1)
GATHER=$(grep -n 'dist.gather(.*# the gather' "$JOB" | cut -d: -f1)

run gather 2 --shape gather; rc=$?
tap_eq "rank 0 in a gloo all_reduce, rank 1 in a gather, the group's call 4 on both: a DESYNC naming both calls" \
    "ccshim DESYNC comm=G size=2 seq=4: torch.distributed group, every member blocked past 1.0 s; rank 0 in torch.distributed.all_reduce (gloo) at gloo_calls_job.py:$REDUCE in main (call 4) for T s; rank 1 in torch.distributed.gather (gloo) at gloo_calls_job.py:$GATHER in main (call 4) for T s: different collectives at the group's call 4" \
    "$(verdict gather)"
tap_eq "... within 2 s of the calls ($(longest gather) s), the job ended with exit status 3" "1 3" \
    "$(within "$(longest gather)" 2.0 && echo 1) $rc"

run healthy 2 --shape healthy --slow 1.5; rc=$?
tap_eq "the same calls, rank 1 1.5 s late to the last two: runs, no verdict" "0 done 0" \
    "$rc $(cat "$CCS_TMP/healthy.out") $(nverdicts healthy)"

run groups 3 --shape groups --slow 1.5; rc=$?
tap_eq "rank 0 in group A's all_reduce, rank 1 in group B's broadcast, both for rank 2 (1.5 s late): no verdict" \
    "0 done 0" "$rc $(cat "$CCS_TMP/groups.out") $(nverdicts groups)"

run object 2 --shape object --slow 1.5; rc=$?
tap_eq "all_gather_object on both ranks, rank 1 1.5 s late, then an all_reduce, twice: no verdict" "0 done 0" \
    "$rc $(cat "$CCS_TMP/object.out") $(nverdicts object)"
