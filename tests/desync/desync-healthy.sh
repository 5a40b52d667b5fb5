#!/bin/sh
# desync-healthy.sh - no false positive: 3 ranks, several iterations, one
# random rank computing 1.2 to 2.5 s per iteration (longer than the 1 s
# block threshold) while the others wait in the all-reduce.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
tap_plan 3

dsx_run healthy 60 3 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_STRAGGLER_MS=2000 -- "$SCENARIO" healthy 4
tap_eq "exit 0 (nothing aborted it)" 0 "$DSX_RC"
tap_eq "no MISMATCH, DESYNC or DEAD" "" \
    "$(cat "$CCS_TMP/healthy"/log-*.txt 2>/dev/null | grep -E '^ccshim (MISMATCH|DESYNC|DEAD) ' || true)"
# Waits over 2 s (the lowered straggler threshold) are warned about, as STRAGGLER only.
tap_check "long waits are STRAGGLER warnings naming the computing rank" \
    sh -c 'cat "$1"/log-*.txt | grep -Eq "^ccshim STRAGGLER comm=0x[0-9a-f]+ size=3 seq=[0-9]+: ranks? [0-9,-]+ waited [0-9.]+ s in allreduce\(count=4, float32, sum\) for rank [0-2] "' _ "$CCS_TMP/healthy"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag healthy
tap_done
