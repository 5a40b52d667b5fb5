#!/bin/sh
# gpu-dry-run.sh - what `make check` can test of issue 7's GPU checks without
# a GPU (docs/gpu-validation.md): the scripts' syntax, gpu_common.py's
# comparison, the NCCL bench program under the shim, and the device script
# itself in --cpu-dry-run mode on a carry assembled from this build tree
# (its GPU parts report SKIP; its host-NCCL parts must pass).
. "$top_srcdir/tests/tap.sh"
g="$top_srcdir/tests/gpu"
bench="$top_builddir/tests/gpu/nccl_bench"
fake="$top_builddir/tests/nccl/libnccl.so.2"
trainer_nccl="$top_builddir/ccshim-trainer-nccl"
PY=$(command -v python3 || true)
PYTHONDONTWRITEBYTECODE=1; export PYTHONDONTWRITEBYTECODE # nothing written into the source tree
[ -n "$PY" ] || tap_skip_all "no python3"
[ -x "$bench" ] && [ -f "$fake" ] || tap_skip_all "built without NCCL headers (no host NCCL, no nccl_bench)"
[ -x "$trainer_nccl" ] || tap_skip_all "ccshim-trainer-nccl not built (needs libnccl and BLAS)"
[ -x "$CCSHIM_TRAINER" ] && [ -n "${MPIRUN:-}" ] || tap_skip_all "no MPI trainer for the reference figures"
tap_plan 15

if command -v shellcheck > /dev/null; then
    tap_check "shellcheck: build-carry.sh run-device-checks.sh make-expected.sh" \
        shellcheck "$g/build-carry.sh" "$g/run-device-checks.sh" "$g/make-expected.sh"
else
    tap_skip "shellcheck" "shellcheck not installed"
fi
tap_check "the Python scripts compile (torch and sentence-transformers are only imported at run time)" \
    "$PY" -c 'import py_compile, sys, os
for f in sys.argv[2:]:
    py_compile.compile(f, cfile=os.path.join(sys.argv[1], os.path.basename(f) + "c"), doraise=True)' \
    "$CCS_TMP" "$g/gpu_common.py" "$g/gpu_ddp_cached.py" "$g/gpu_st_cmnrl.py" "$g/gpu_graph.py"

# gpu_common.py compare: two runs written by save_run, equal then perturbed.
"$PY" - "$g" "$CCS_TMP" <<'PYEOF'
import array, sys
sys.path.insert(0, sys.argv[1])
import gpu_common as g
a = array.array("f", [1.0, -2.0, 4.0]).tobytes()
b = array.array("f", [1.0, -2.0, 4.001]).tobytes()
g.save_run(sys.argv[2] + "/a", {"losses": [0.5, 0.25]}, [a, a], a)
g.save_run(sys.argv[2] + "/b", {"losses": [0.5, 0.25]}, [a, a], a)
g.save_run(sys.argv[2] + "/c", {"losses": [0.5, 0.25]}, [a, b], b)
PYEOF
cmp_ab=$("$PY" "$g/gpu_common.py" compare "$CCS_TMP/a" "$CCS_TMP/b")
tap_check "compare: identical runs are bitwise equal" sh -c 'echo "$1" | grep -q "\"grads_bitwise_equal\": true, .*\"params_bitwise_equal\": true"' _ "$cmp_ab"
rel=$("$PY" -c 'import json, sys; c = json.loads(sys.argv[1]); print("%s %.6f" % (c["params_bitwise_equal"], c["param_max_rel_diff"]))' \
    "$("$PY" "$g/gpu_common.py" compare "$CCS_TMP/c" "$CCS_TMP/a")")
tap_eq "compare: a perturbed run differs by |4.001 - 4| / 4" "False 0.000250" "$rel"

# The bench program under the shim, on the host NCCL: every call counted.
LD_LIBRARY_PATH="$top_builddir/tests/nccl" RANK=0 WORLD_SIZE=1 "$CCSHIM_RUN" --no-mpi -- "$bench" --host --batch 10 --reps 5 \
    > "$CCS_TMP/bench.out" 2> "$CCS_TMP/bench.err"
tap_eq "nccl_bench --host under ccshim: runs, 70 all-reduces counted" "0 70" \
    "$? $(sed -n 's/.*(allreduce \([0-9]*\)).*/\1/p' "$CCS_TMP/bench.err")"

# A carry from this build tree, as build-carry.sh lays it out.
c="$CCS_TMP/carry"
mkdir -p "$c/bin" "$c/lib" "$c/fake" "$c/fakecuda" "$c/tests" "$c/deps" "$c/share/ccshim"
ln -s "$CCSHIM_RUN" "$CCSHIM_AUDIT" "$trainer_nccl" "$c/bin/"
ln -s "$top_builddir/.libs/libccshim.so" "$c/lib/"
ln -s "$fake" "$c/fake/"
ln -s "$bench" "$top_builddir/tests/gpu/gpu_stuck" "$top_builddir/tests/nccl/nccl_track" "$c/tests/"
ln -s "$top_builddir/tests/cuda/libcuda.so.1" "$c/fakecuda/"
ln -s "$top_srcdir/tools/python" "$c/share/ccshim/python"
echo "ccshim GPU carry assembled by gpu-dry-run.sh from $top_builddir" > "$c/MANIFEST"
sh "$g/make-expected.sh" "$c/expected" "$CCSHIM_TRAINER" "$MPIRUN" "$CCSHIM_RUN" "$top_builddir/.libs" \
    2> "$CCS_TMP/expected.err"
tap_eq "make-expected.sh: the MPI trainer's figures for 1 and 2 ranks, a verdict for each injected fault" "0 4 4 3" \
    "$? $(find "$c/expected" -name '*.json' | wc -l) $(find "$c/expected" -name '*.dump' | wc -l) \
$(grep -Ec "	ccshim (DESYNC|MISMATCH) comm=" "$c/expected/protocol.txt")"

o="$CCS_TMP/out"
CCSHIM_GPU_BUDGET_S=120 PYTHON="$PY" ccs_run_timeout 150 bash "$g/run-device-checks.sh" --cpu-dry-run --carry "$c" \
    --out "$o" > "$CCS_TMP/dry.out" 2>&1
rc=$?
tap_check "the device script's dry run ends on its own with one result per check (exit $rc)" \
    sh -c '[ "$1" != 124 ] && [ "$(cut -f1 "$2" | tr "\n" " ")" = "ddp-cached st-cmnrl trainer-nccl overhead desync-nccl completion graph-capture " ]' _ "$rc" "$o/results.tsv"
status() { awk -F'\t' -v c="$1" '$1 == c { print $2 }' "$o/results.tsv"; }
fig() { grep "^check 3: $1 " "$o/figures.txt"; }
tap_check "check 3, 1 rank of the host NCCL: 16 all-reduces per step (trainer and ccshim), gradients bitwise the MPI backend's" \
    sh -c 'echo "$1" | grep -q "own count 16/step; ccshim: {\"0\": {\"real\": 16, \"deferred\": 0}, \"1\": {\"real\": 16, \"deferred\": 0}, \"2\": {\"real\": 16, \"deferred\": 0}}; gradients and parameters bitwise equal to MPI"' _ "$(fig host-w1)"
tap_check "check 3, 2 ranks: 8 per step, bitwise the MPI backend's" \
    sh -c 'echo "$1" | grep -q "own count 8/step; ccshim: {\"0\": {\"real\": 8, \"deferred\": 0}, \"1\": {\"real\": 8, \"deferred\": 0}, \"2\": {\"real\": 8, \"deferred\": 0}}; gradients and parameters bitwise equal to MPI"' _ "$(fig host-w2)"
tap_eq "check 3 on the host NCCL passes (every:8 coalesces to 1 real + 7 deferred, as per-step)" SKIP "$(status trainer-nccl)"
grep "trainer-nccl" "$o/results.tsv" | tap_diag
tap_check "check 4: a side-by-side ratio on the host NCCL" grep -Eq "^check 4 \(host\): .*ratio [0-9.]+ " "$o/figures.txt"
tap_eq "check 5's protocol part on the host NCCL passes (a DESYNC verdict, then ncclCommAbort)" SKIP "$(status desync-nccl)"
grep "desync-nccl" "$o/results.tsv" | tap_diag
tap_check "checks 1 and 2 skip without a GPU, never fail" sh -c '[ "$1" = SKIP ] && [ "$2" = SKIP ]' _ \
    "$(status ddp-cached)" "$(status st-cmnrl)"
tap_check "check 6 (completion tracking) on the test libraries: the pending all-reduce seen within 2 s, its progress, no verdict" \
    sh -c '[ "$1" = SKIP ] && grep -Eq "^check 6 \(dry run .*\): .enqueued 1, completed 0 on the device; no progress for (1|2)\.[0-9] s.; .progress on the device again after [0-9.]+ s." "$2"' \
    _ "$(status completion)" "$o/figures.txt"
grep "completion" "$o/results.tsv" | tap_diag
tap_check "check 7 (graph capture) on the test libraries: no event, no query, no communicator, 4 calls flagged captured" \
    sh -c '[ "$1" = SKIP ] && grep -q "^check 7 (dry run, test libraries): recorded_during_capture=0 recorded_while_capturing=0 queried_while_capturing=0 comms_created_during=0 .*flagged captured: 4$" "$2"' \
    _ "$(status graph-capture)" "$o/figures.txt"
grep "graph-capture" "$o/results.tsv" | tap_diag
[ "$TAP_FAILED" -eq 0 ] || tap_diag < "$CCS_TMP/dry.out"
tap_done
