#!/bin/sh
# The real libnccl behind the shim: nccl_real (linked to it) prints what
# NCCL answers, alone and with libccshim.so preloaded.  The answers must be
# identical: ncclGetVersion reaches the real library, and on a machine
# without a GPU the real errors of ncclCommInitRank and ncclAllReduce come
# back unchanged, without a crash.  With a GPU the same comparison holds for
# the successful calls.  The trace records the calls, failed ones flagged.
. "$top_srcdir/tests/tap.sh"

PROG=$top_builddir/tests/nccl/nccl_real
SHIM=$top_builddir/.libs/libccshim.so
DUMP=$top_builddir/tests/ccs_trace_dump
[ -x "$PROG" ] || tap_skip_all "the real libnccl was not found at configure time (nccl_real not built)"
[ -f "$SHIM" ] || tap_skip_all "libccshim.so is not built"
tap_plan 6

ccs_run_timeout 120 "$PROG" >"$CCS_TMP/plain.out" 2>"$CCS_TMP/plain.err"
rc_plain=$?
mkdir -p "$CCS_TMP/traces"
ccs_run_timeout 120 env LD_PRELOAD="$SHIM" CCSHIM_TRACE_DIR="$CCS_TMP/traces" "$PROG" \
    >"$CCS_TMP/shim.out" 2>"$CCS_TMP/shim.err"
rc_shim=$?
tap_eq "exits 0 without the shim" 0 "$rc_plain"
tap_eq "exits 0 with the shim (no crash)" 0 "$rc_shim"
tap_eq "every NCCL answer identical with and without the shim" "$(cat "$CCS_TMP/plain.out")" "$(cat "$CCS_TMP/shim.out")"
cat "$CCS_TMP/shim.out" | tap_diag
tap_check "ncclGetVersion answered by the real library (2.x)" \
    grep -Eq '^ncclGetVersion rc=0 version=2[0-9]{4}$' "$CCS_TMP/shim.out"

init_rc=$(sed -n 's/^ncclCommInitRank rc=\([0-9]*\).*/\1/p' "$CCS_TMP/shim.out")
ar_rc=$(sed -n 's/^ncclAllReduce rc=\([0-9]*\)$/\1/p' "$CCS_TMP/shim.out")
if [ -x "$DUMP" ]; then
    "$DUMP" "$CCS_TMP"/traces/*.cctrace >"$CCS_TMP/dump.tsv" 2>"$CCS_TMP/dump.err"
    # The flag "error" must be on exactly the records whose call failed.
    exp_init=$( [ "$init_rc" = 0 ] && echo "comm_init -" || echo "comm_init error")
    exp_ar=$( [ "$ar_rc" = 0 ] && echo "allreduce -" || echo "allreduce error")
    tap_eq "the trace holds ncclCommInitRank and ncclAllReduce, flagged failed exactly when NCCL failed" \
        "$exp_init
$exp_ar" "$(awk '$1 == "R" && ($5 == "comm_init" || $5 == "allreduce") { print $5, ($7 ~ /error/ ? "error" : "-") }' "$CCS_TMP/dump.tsv")"
else
    tap_skip "trace contents" "ccs_trace_dump not built"
fi
tap_eq "the shim logged no error of its own" "" "$(grep 'ccshim\[' "$CCS_TMP/shim.err" | grep -v ': summary: ' || true)"
tap_done
