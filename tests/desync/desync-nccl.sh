#!/bin/sh
# desync-nccl.sh - the source scenario over NCCL without MPI: 4 ranks of
# ccshim-trainer-nccl (--device host, on the test-only host NCCL), started
# from RANK / WORLD_SIZE as torchrun would, rank 1 skipping a mini-batch in
# step 3.  Detection starts at the first communicator; abort ends the job
# through ncclCommAbort.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
T="$top_builddir/ccshim-trainer-nccl"
[ -x "$T" ] || tap_skip_all "ccshim-trainer-nccl not built (no NCCL headers)"
[ -f "$top_builddir/tests/nccl/libnccl.so.2" ] || tap_skip_all "test-only host NCCL not built"
LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
tap_plan 3
d="$CCS_TMP/nccl"
mkdir -p "$d"
pids=""
for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_ON_DESYNC=abort \
        ccs_run_timeout 40 "$CCSHIM_RUN" --no-mpi -- "$T" --device host --nccl-id-file "$d/id" \
        --sync=per-minibatch --inject=skip-minibatch:1:3 --steps 5 >"$d/out-$r" 2>&1 &
    pids="$pids $!"
done
timeouts=0
for p in $pids; do wait "$p"; [ $? -eq 124 ] && timeouts=$((timeouts + 1)); done
tap_eq "no rank left hanging until the timeout" 0 "$timeouts"
lines=$(cat "$d"/log-*.txt 2>/dev/null | grep '^ccshim DESYNC ' | sed 's/ \[seen by rank.*//; s/ for [0-9.]* s/ for N s/' | sort -u)
tap_check "DESYNC: rank 1 issued fewer collectives than the others in step 3" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 1 issued seq [0-9]+ \(allreduce\(count=[0-9]+, float64, sum\)\) in step 4 where ranks 0,2-3 issued it in step 3: rank 1 issued fewer collectives than the others in step 3 and is behind from there on$"' _ "$lines"
# (With abort, the job may end on this first verdict, before everyone is
# blocked at the end of the run: the later DESYNC is not required.)
tap_check "the abort went through ncclCommAbort" grep -q "CCSHIM_ON_DESYNC=abort: aborting the job" "$d/log-0.txt"
[ "$TAP_FAILED" -eq 0 ] || { echo "$lines"; head -20 "$d"/log-*.txt "$d"/out-*; } | tap_diag
tap_done
