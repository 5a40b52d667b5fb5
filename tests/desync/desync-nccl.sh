#!/bin/sh
# desync-nccl.sh - the source scenario over NCCL without MPI: 4 ranks of
# ccshim-trainer-nccl (--device host, on the test-only host NCCL), started
# from RANK / WORLD_SIZE as torchrun would, rank 1 skipping a mini-batch in
# step 3.  Detection starts at the first communicator; abort ends the job
# through ncclCommAbort.
#
# Then a silent MISMATCH on one host: rank 1 reduces one element less,
# once, and the test NCCL lets the call complete, so the job runs on (and
# ends normally).  The host's own search finds the seq from the running
# hashes and every rank names the same odd call (docs/desync.md, "Finding
# the seq"): while the job runs (step 3 of 1000, about 1.6 s) and in its
# last calls (step 30 of 40: 40 seqs before the end, about 20 ms).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
T="$top_builddir/ccshim-trainer-nccl"
[ -x "$T" ] || tap_skip_all "ccshim-trainer-nccl not built (no NCCL headers)"
[ -f "$top_builddir/tests/nccl/libnccl.so.2" ] || tap_skip_all "test-only host NCCL not built"
LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
tap_plan 11
# nccl_job NAME [VAR=VALUE...] -- TRAINER ARGS...: 4 ranks started as
# torchrun would, each killed after 40 s; sets D (their logs and output)
# and TIMEOUTS (ranks killed).
nccl_job() {
    D="$CCS_TMP/$1"
    shift
    local envs="" r p pids=""
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    mkdir -p "$D"
    for r in 0 1 2 3; do
        # shellcheck disable=SC2086
        RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 CCSHIM_LOG="$D/log-%r.txt" CCSHIM_SUMMARY=0 \
            ccs_run_timeout 40 env $envs "$CCSHIM_RUN" --no-mpi -- "$T" --device host --nccl-id-file "$D/id" \
            "$@" >"$D/out-$r" 2>&1 &
        pids="$pids $!"
    done
    TIMEOUTS=0
    for p in $pids; do wait "$p"; [ $? -eq 124 ] && TIMEOUTS=$((TIMEOUTS + 1)); done
}
nccl_job nccl CCSHIM_ON_DESYNC=abort -- --sync=per-minibatch --inject=skip-minibatch:1:3 --steps 5
tap_eq "no rank left hanging until the timeout" 0 "$TIMEOUTS"
lines=$(cat "$D"/log-*.txt 2>/dev/null | grep '^ccshim DESYNC ' | sed 's/ \[seen by rank.*//; s/ for [0-9.]* s/ for N s/' | sort -u)
tap_check "DESYNC: rank 1 issued fewer collectives than the others in step 3" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 1 issued seq [0-9]+ \(allreduce\(count=[0-9]+, float64, sum\)\) in step 4 where ranks 0,2-3 issued it in step 3: rank 1 issued fewer collectives than the others in step 3 and is behind from there on$"' _ "$lines"
# (With abort, the job may end on this first verdict, before everyone is
# blocked at the end of the run: the later DESYNC is not required.)
tap_check "the abort went through ncclCommAbort" grep -q "CCSHIM_ON_DESYNC=abort: aborting the job" "$D/log-0.txt"
[ "$TAP_FAILED" -eq 0 ] || { echo "$lines"; head -20 "$D"/log-*.txt "$D"/out-*; } | tap_diag

ODD='^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 1 issued allreduce\(count=3151, float64, sum\) where ranks 0,2-3 issued allreduce\(count=3152, float64, sum\)$'
for c in "running 3 1000" "last 30 40"; do
    set -- $c
    # rank 1's count one short in step $2 of $3, under the default policy (warn)
    mkdir -p "$CCS_TMP/$1/trace"
    nccl_job "$1" CCSHIM_TRACE_DIR="$CCS_TMP/$1/trace" CCSHIM_JOB_ID="$1" -- --inject=wrong-count:1:"$2" --steps "$3"
    tap_eq "$1: no rank hung" 0 "$TIMEOUTS"
    lines=$(cat "$D"/log-*.txt 2>/dev/null | grep '^ccshim MISMATCH ' | sed 's/ \[seen by rank.*//' | sort -u)
    tap_check "$1: one MISMATCH naming rank 1 and both counts" sh -c 'test "$(echo "$1" | grep -c .)" -eq 1 && echo "$1" | grep -Eq "$2"' _ "$lines" "$ODD"
    # One host: one line and one full report in the combined log; the
    # verdict in every rank's own file (each acts on it).
    tap_eq "$1: one line and one full report, in every rank's file" "1 1 1 1 1 1" \
        "$(cat "$D"/log-*.txt | grep -c '^ccshim MISMATCH ') $(cat "$D"/log-*.txt | grep -c '^ccshim desync| comm ') $(for r in 0 1 2 3; do grep -c '^ccshim MISMATCH ' "$D/trace/ccshim-desync-$1-r$r.txt" 2>/dev/null || echo 0; done | tr '\n' ' ' | sed 's/ $//')"
    t0=$(sed -n 's/^culprit_call_ms=//p' "$D/out-1" | head -1)
    t1=$(cat "$D"/log-*.txt | grep '^ccshim MISMATCH ' | sed -n 's/.* at=\([0-9.]*\)\]$/\1/p' | sort -n | head -1)
    lat=$(awk -v a="${t0:-0}" -v b="${t1:-999999999}" 'BEGIN { printf "%d\n", (a > 0 ? b - a : 999999) }')
    tap_check "$1: reported $lat ms after rank 1's call (<= 5000)" test "$lat" -le 5000
    echo "# figure: one host, silent count mismatch ($1) $lat ms"
    [ "$TAP_FAILED" -eq 0 ] || { echo "$lines"; head -5 "$D"/log-*.txt; } | tap_diag
done
tap_done
