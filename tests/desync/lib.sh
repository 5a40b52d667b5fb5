# tests/desync/lib.sh - sourced by the desync shell tests (after tap.sh).
#
#   dsx_run NAME SECONDS NP [VAR=VALUE...] -- PROGRAM ARGS...
# runs PROGRAM on NP ranks under ccshim-run with per-rank logs in
# $CCS_TMP/NAME/log-R.txt, traces in $CCS_TMP/NAME/trace, stdout in
# $CCS_TMP/NAME/out; sets DSX_RC.
SCENARIO="$top_builddir/tests/desync/desync_scenario"

dsx_run() {
    local name=$1 secs=$2 np=$3; shift 3
    local d="$CCS_TMP/$name"
    mkdir -p "$d/trace"
    local envs=""
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    ccs_mpirun "$secs" "$np" env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_TRACE_DIR="$d/trace" CCSHIM_SUMMARY=0 \
        CCSHIM_JOB_ID="$name" $envs "$CCSHIM_RUN" --mpi -- "$@" >"$d/out" 2>"$d/err"
    DSX_RC=$?
}

# dsx_lines NAME CLASS: the verdict lines of CLASS from every rank's log,
# without the "[seen by ...]" suffix and with "for 1.2 s" (which differs
# from rank to rank) as "for N s", one per distinct text.
dsx_lines() {
    cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep "^ccshim $2 " | sed 's/ \[seen by rank.*//; s/ for [0-9.]* s/ for N s/g' |
        sort -u
}

# dsx_count NAME CLASS: how many ranks logged a CLASS line (one rank a
# host per verdict: the one its host's claim names, docs/desync.md).
dsx_count() {
    grep -l "^ccshim $2 " "$CCS_TMP/$1"/log-*.txt 2>/dev/null | wc -l | tr -d ' '
}

# dsx_files NAME CLASS: how many ranks' report files (the trace directory)
# hold a CLASS line: every rank that judged or received the verdict.
dsx_files() {
    grep -l "^ccshim $2 " "$CCS_TMP/$1"/trace/ccshim-desync-*.txt 2>/dev/null | wc -l | tr -d ' '
}

# dsx_per_host NAME CLASS "RANKS" "RANKS"...: for each host (its ranks,
# e.g. "0 1" "2 3"), how many lines each distinct CLASS verdict has in the
# logs of its ranks ("1": one line for each; "1,2": one verdict has two),
# then whether the job's combined log holds one full report (block) per
# distinct verdict: "1 1 one-report-per-verdict" for one line of each
# verdict on each of two hosts (docs/desync.md: one rank a host logs it).
dsx_per_host() {
    local d="$CCS_TMP/$1" cls=$2 out="" files r h blocks distinct texts
    shift 2
    texts=$(cat "$d"/log-*.txt 2>/dev/null | grep "^ccshim $cls " | sed 's/ \[seen by.*//; s/ for [0-9.]* s/ for N s/g' | sort -u)
    for h in "$@"; do
        files=""
        for r in $h; do files="$files $d/log-$r.txt"; done
        # shellcheck disable=SC2086
        out="$out$(echo "$texts" | while IFS= read -r v; do
            cat $files 2>/dev/null | grep "^ccshim $cls " | sed 's/ \[seen by.*//; s/ for [0-9.]* s/ for N s/g' | grep -cxF -- "$v"
        done | sort -u | paste -sd, -) "
    done
    blocks=$(cat "$d"/log-*.txt 2>/dev/null | grep -c '^ccshim desync| comm ')
    distinct=$(cat "$d"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]* comm=' | sed 's/ \[seen by.*//; s/ for [0-9.]* s/ for N s/g' |
        sort -u | wc -l | tr -d ' ')
    if [ "$blocks" -eq "$distinct" ]; then echo "${out}one-report-per-verdict"
    else echo "${out}$blocks-reports-for-$distinct-verdicts"; fi
}

# dsx_blocks NAME: full reports (blocks) in the job's combined log.
dsx_blocks() {
    cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep -c '^ccshim desync| comm '
}

# dsx_latency_ms NAME CLASS: first report time minus the culprit's call.
dsx_latency_ms() {
    local t0 t1
    t0=$(sed -n 's/^culprit_call_ms=//p' "$CCS_TMP/$1/out" | head -1)
    t1=$(cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep "^ccshim $2 " | sed -n 's/.* at=\([0-9.]*\)\]$/\1/p' |
        sort -n | head -1)
    if [ -z "$t0" ] || [ -z "$t1" ]; then echo 999999; return; fi
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d\n", b - a }'
}

# dsx_diag NAME: the logs and outputs, as TAP comments (on failure).
dsx_diag() {
    for f in "$CCS_TMP/$1"/out "$CCS_TMP/$1"/err "$CCS_TMP/$1"/log-*.txt; do
        [ -f "$f" ] && { echo "--- $f"; head -40 "$f"; }
    done | tap_diag
}

# dsx_check_verdict NAME CLASS REGEX: two TAP points for a run under
# CCSHIM_ON_DESYNC=abort: the job ended with an error (not by the timeout),
# and exactly one CLASS line was reported, matching REGEX (ranks and seq).
dsx_check_verdict() {
    local name=$1 cls=$2 re=$3 lines
    lines=$(dsx_lines "$name" "$cls")
    if [ "$DSX_RC" -ne 0 ] && [ "$DSX_RC" -ne 124 ]; then tap_ok "$name: abort ends the job (exit $DSX_RC)"
    else tap_not_ok "$name: abort ends the job (exit $DSX_RC)"; dsx_diag "$name"; fi
    if [ -n "$lines" ] && [ "$(echo "$lines" | wc -l)" -eq 1 ] && echo "$lines" | grep -Eq "$re"; then
        tap_ok "$name: $cls with the right ranks and seq"
    else
        tap_not_ok "$name: $cls with the right ranks and seq"; echo "$lines" | tap_diag; dsx_diag "$name"
    fi
}
