#!/bin/sh
# gpu-scripts-cpu.sh - the GPU checks' Python (tests/gpu/gpu_ddp_cached.py,
# gpu_st_cmnrl.py; written without sentence-transformers at hand) run for
# real with torch 2.13 and sentence-transformers 6.0.1 on the CPU (gloo, one
# process, as run-device-checks.sh runs them on NCCL), under ccshim-run
# --torch: the report's TinyCachedLoss over the real CachedLossMixin, per
# mini-batch and with no_sync() for all but the last backward (the report's
# fix), the same losses and parameters; CachedMultipleNegativesRankingLoss on
# a small BERT; one step marked per optimizer step.  Only the device itself
# is left untried.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 5
GPU="$top_srcdir/tests/gpu"
one() {  # NAME SCRIPT ARGS: one process under ccshim-run --torch (no MPI)
    local name=$1 script=$2
    shift 2
    ccs_run_timeout 180 "$CCSHIM_RUN" --no-mpi --torch -- "$RS_PY" "$GPU/$script" --backend gloo \
        --out "$CCS_TMP/$name" "$@" > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
    local rc=$?
    [ $rc = 0 ] || { echo "# $name: exit $rc"; tail -n 5 "$CCS_TMP/$name.err" | tap_diag; }
    return $rc
}
# meta RUN KEY...: the values of KEY... in RUN's meta.json
meta() {
    local run=$1
    shift
    "$RS_PY" -c 'import json, sys; m = json.load(open(sys.argv[1] + "/meta.json")); print(*(m[k] for k in sys.argv[2:]))' \
        "$CCS_TMP/$run" "$@"
}

one pmb gpu_ddp_cached.py --impl st --mode per-minibatch --port "$(ccs_ports 2)"
rc1=$?
one nos gpu_ddp_cached.py --impl st --mode no-sync --port "$(ccs_ports 2)"
tap_eq "gpu_ddp_cached.py --impl st: both modes run, on sentence-transformers' CachedLossMixin, 5 steps marked each" \
    "0 0 st st 2 8" "$rc1 $? $(meta pmb impl) $(meta nos impl) $(cat "$CCS_TMP"/pmb.err "$CCS_TMP"/nos.err | grep -c 'summary: .*, 5 steps,') $(meta pmb reductions_per_step)"
cmp=$("$RS_PY" "$GPU/gpu_common.py" compare "$CCS_TMP/pmb" "$CCS_TMP/nos")
echo "# per-minibatch vs no-sync: $cmp"
tap_eq "per-mini-batch and no_sync() runs: the same losses, gradients and parameters within 1e-6" "True ok ok" \
    "$(echo "$cmp" | "$RS_PY" -c 'import json, sys; d = json.load(sys.stdin)
print(d["losses_equal"], "ok" if d["grad_max_abs_diff"] <= 1e-6 else d["grad_max_abs_diff"],
      "ok" if d["param_max_abs_diff"] <= 1e-6 else d["param_max_abs_diff"])')"

one cmnrl gpu_st_cmnrl.py --steps 3 --port "$(ccs_ports 2)"
tap_eq "gpu_st_cmnrl.py: runs with sentence-transformers 6.0.1's CachedMultipleNegativesRankingLoss, 3 steps marked" \
    "0 6.0.1 1" "$? $(meta cmnrl sentence_transformers) $(grep -c 'summary: .*, 3 steps,' "$CCS_TMP/cmnrl.err")"
tap_eq "  ... 3 finite losses; on the device: 8 reductions per bucket per step (32 / 8 x 2 columns)" "3 8" \
    "$("$RS_PY" -c 'import json, math, sys; m = json.load(open(sys.argv[1] + "/meta.json"))
print(sum(map(math.isfinite, m["losses"])), m["reductions_per_bucket_per_step"])' "$CCS_TMP/cmnrl")"
tap_eq "  ... no deprecation warning from sentence-transformers' old import paths" 0 \
    "$(grep -c 'sentence_transformers\.\(losses\|models\)' "$CCS_TMP/cmnrl.err")"
tap_done
