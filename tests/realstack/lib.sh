# tests/realstack/lib.sh - sourced by the real-stack tier's tests
# (tests/realstack/*.sh): torch 2.13 and sentence-transformers 6.0.1 from the
# virtual environment scripts/realstack-venv.sh made (scripts/setup.sh calls
# it), the runner of a job on NP ranks, and tests/torch/lib.sh's counts from
# the traces (per_step, expect_steps, val, close).
. "$top_srcdir/tests/torch/lib.sh"
RS_VENV=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st}
RS_PY=$RS_VENV/bin/python
RS_DIR="$top_srcdir/tests/realstack"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_DATASETS_OFFLINE TOKENIZERS_PARALLELISM
# the datasets/transformers caches of the jobs stay in the test's directory
HF_HOME=$CCS_TMP/hf
export HF_HOME

# rs_require: skips the test (one line saying why) when the tier's Python is
# not there: no PyPI when setup.sh ran, a failed install, CCSHIM_NO_REALSTACK.
rs_require() {
    ccs_have_mpi || tap_skip_all "built without MPI"
    [ -x "$CCSHIM_RUN" ] && [ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-run or ccshim-audit not built"
    if [ ! -x "$RS_PY" ]; then
        local why="no $RS_VENV (scripts/setup.sh makes it with scripts/realstack-venv.sh)"
        [ -f "$RS_VENV.status" ] && why="$(sed -n '1s/^skip: //p' "$RS_VENV.status") ($RS_VENV.status)"
        tap_skip_all "real-stack tier: $why"
    fi
    local err
    err=$("$RS_PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import rs_common; rs_common.check_versions()' \
        "$RS_DIR" 2>&1 >/dev/null) || tap_skip_all "real-stack tier: $RS_PY: $(echo "$err" | tail -n 1)"
    TORCH_PY=$RS_PY
}

# rs NAME NP [--set NAME=VALUE | --plain] -- JOB.py ARGS: the job on NP
# ranks under ccshim-run --mpi --torch with traces in $CCS_TMP/NAME.tr
# (--plain: without ccshim); out/err in $CCS_TMP/NAME.{out,err}.
rs() {
    local name=$1 np=$2 sets="" plain=0
    shift 2
    while [ "$1" != "--" ]; do
        if [ "$1" = --plain ]; then plain=1; else sets="$sets $1"; fi
        shift
    done
    shift
    local job="$RS_DIR/$1"
    shift
    if [ "$plain" = 1 ]; then
        ccs_mpirun "${RS_LIMIT:-240}" "$np" "$RS_PY" "$job" "$@" > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    else
        # shellcheck disable=SC2086
        ccs_mpirun "${RS_LIMIT:-240}" "$np" "$CCSHIM_RUN" --mpi --torch --trace-dir "$CCS_TMP/$name.tr" \
            $sets -- "$RS_PY" "$job" "$@" > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    fi
    local rc=$?
    [ $rc = 0 ] || { echo "# $name: exit $rc"; tail -n 8 "$CCS_TMP/$name.err" | tap_diag; }
    return $rc
}
# py_site_calls NAME: "CALLS PYTHON-LINE" per Python call site of NAME's
# all-reduces (all ranks), from ccshim-audit --json
py_site_calls() {
    "$CCSHIM_AUDIT" --json --no-symbols "$CCS_TMP/$1.tr" 2>/dev/null | "$RS_PY" -c '
import collections, json, sys
n = collections.Counter()
for s in json.load(sys.stdin)["sites"]:
    if "allreduce" in s["kinds"]:
        n[s.get("python") or "-"] += s["count"]
for k in sorted(n):
    print(n[k], k)'
}
