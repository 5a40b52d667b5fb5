# tests/torch/lib.sh - sourced by the real-PyTorch tests (tests/torch/*.sh):
# the interpreter with torch and mpi4py, a DDP job runner and the counts
# from the traces.
. "$top_srcdir/tests/tap.sh"
# Debian's python3-torch and python3-mpi4py install for /usr/bin/python3; the
# python3 first on PATH may be another interpreter without them.
TORCH_PY=${TORCH_PYTHON:-/usr/bin/python3}
torch_require() {
    ccs_have_mpi || tap_skip_all "built without MPI"
    [ -x "$CCSHIM_RUN" ] || tap_skip_all "ccshim-run not built"
    [ -x "$TORCH_PY" ] || tap_skip_all "no $TORCH_PY (scripts/setup.sh installs python3-torch python3-mpi4py)"
    "$TORCH_PY" -c 'import torch, mpi4py, torch.distributed as d; assert d.is_gloo_available()' \
        2> /dev/null || tap_skip_all "$TORCH_PY cannot import torch (with gloo) and mpi4py" \
        "(scripts/setup.sh installs python3-torch python3-mpi4py)"
    [ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
}
TORCH_JOB="$top_srcdir/tests/torch/ddp_job.py"
PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
export PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS
# A tiny model in several buckets (DDP rebuilds them during step 0).
BUCKETS="--bucket-cap-mb 0.001 --first-bucket-bytes 1000"

# ddp NAME NP [--set NAME=VALUE ...] -- JOB ARGS: the job under ccshim-run
# --torch (no --set: plain, without ccshim); out/err/trace in $CCS_TMP/NAME.*
ddp() {
    local name=$1 np=$2 sets="" plain=1
    shift 2
    while [ "$1" != "--" ]; do sets="$sets $1"; plain=0; shift; done
    shift
    if [ "$plain" = 1 ]; then
        ccs_mpirun "${DDP_LIMIT:-120}" "$np" "$TORCH_PY" "$TORCH_JOB" "$@" \
            > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    else
        # shellcheck disable=SC2086
        ccs_mpirun "${DDP_LIMIT:-120}" "$np" "$CCSHIM_RUN" --mpi --torch --trace-dir "$CCS_TMP/$name.tr" \
            ${DDP_SETS:-} $sets -- "$TORCH_PY" "$TORCH_JOB" "$@" > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    fi
    local rc=$?
    [ $rc = 0 ] || { echo "# $name: exit $rc"; tail -n 5 "$CCS_TMP/$name.err" | tap_diag; }
    return $rc
}
# val NAME KEY: the job's "KEY VALUE" line
val() { awk -v k="$2" '$1==k {print $2}' "$CCS_TMP/$1.out"; }
# close NAME: "ranks_equal 1, within 1e-5" when the ranks ended bitwise equal
# and within 1e-5 of the reference given by --ref
close() {
    awk '$1=="ranks_equal" {e=$2} $1=="maxdiff" {d=$2; m=1}
         END { printf "ranks_equal %s, %s\n", e, (m && d + 0 <= 1e-5) ? "within 1e-5" : "maxdiff " d }' \
        "$CCS_TMP/$1.out"
}
# per_step NAME [FIRST]: "step rank real deferred" float32 SUM bucket
# all-reduces per step and rank from the traces, steps >= FIRST
per_step() {
    "$CCSHIM_AUDIT" --tsv-records "$CCS_TMP/$1.tr" 2>/dev/null | awk -F'\t' -v f="${2:-0}" '
        !/^#/ && $4=="allreduce" && $6=="float32" && $7=="sum" && $5 > 1 && $10 >= f {
            k=$10" "$1; if ($11 ~ /deferred/) d[k]++; else r[k]++; s[k]=1 }
        END { for (k in s) printf "%s %d %d\n", k, r[k], d[k] }' | sort -n -k1 -k2
}
# expect_steps FIRST LAST NP REAL DEFERRED: the per_step lines expected
expect_steps() {
    local s r
    for s in $(seq "$1" "$2"); do for r in $(seq 0 $(($3 - 1))); do echo "$s $r $4 $5"; done; done
}
