# tests/nccl/lib.sh - sourced by the NCCL completion tests (after tap.sh):
# 4 ranks of ccshim-trainer-nccl --device host on the asynchronous test NCCL
# (FAKENCCL_ASYNC=1) and the test CUDA driver.
#
#   job NAME SECONDS [VAR=VALUE...] -- TRAINER-ARGS
# runs the ranks, each in its own process group, with per-rank logs in
# $CCS_TMP/NAME/log-R.txt and outputs in out-R; waits up to SECONDS; sets
# JOB_WALL (seconds taken), JOB_TIMEOUTS (ranks killed at the limit) and
# JOB_RCS (exit statuses in rank order).  JOB_KILL_AFTER=S kills rank 2
# with SIGKILL S seconds after the start.  JOB_MARKS=1 lets the trainer mark
# its steps (the default runs it with --no-step-marks).
T="$top_builddir/ccshim-trainer-nccl"
LD_LIBRARY_PATH="$top_builddir/tests/nccl:$top_builddir/tests/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
job() {
    local name=$1 secs=$2 d="$CCS_TMP/$1" envs="" r p; shift 2
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    mkdir -p "$d"
    local t0 pids=""
    t0=$(date +%s.%N)
    for r in 0 1 2 3; do
        # shellcheck disable=SC2086
        setsid env RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 FAKENCCL_ASYNC=1 CCSHIM_SUMMARY=0 \
            CCSHIM_LOG="$d/log-%r.txt" $envs "$CCSHIM_RUN" --no-mpi -- "$T" --device host \
            --nccl-id-file "$d/id" $([ "${JOB_MARKS:-0}" = 1 ] || echo --no-step-marks) "$@" >"$d/out-$r" 2>&1 &
        p=$!
        pids="$pids $p"
        CCS_PGIDS="$CCS_PGIDS $p"
        eval "JOB_PID_$r=$p"
    done
    JOB_PIDS=$pids
    [ -n "${JOB_KILL_AFTER:-}" ] && { sleep "$JOB_KILL_AFTER"; kill -KILL "$JOB_PID_2"; }
    local waited=0 alive=1
    while [ "$alive" -eq 1 ] && [ "$waited" -lt $((secs * 10)) ]; do
        alive=0
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" -eq 1 ] && { sleep 0.1; waited=$((waited + 1)); }
    done
    JOB_TIMEOUTS=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && { JOB_TIMEOUTS=$((JOB_TIMEOUTS + 1)); kill -KILL "-$p"; }; done
    JOB_RCS=""
    for p in $pids; do wait "$p"; JOB_RCS="$JOB_RCS $?"; done
    JOB_WALL=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }')
}

lines() { # NAME CLASS: distinct verdict lines of CLASS, "for N s" normalised
    cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep "^ccshim $2 " | sed 's/ \[seen by rank.*//; s/ for [0-9.]* s/ for N s/' |
        sort -u
}
diag() { for f in "$CCS_TMP/$1"/log-*.txt "$CCS_TMP/$1"/out-*; do echo "--- $f"; head -30 "$f"; done | tap_diag; }

