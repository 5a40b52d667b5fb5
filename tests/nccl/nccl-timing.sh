#!/bin/sh
# nccl-timing.sh - the NCCL hang's detection targets (docs/nccl.md), run by
# `make check-timing` (scripts/test.sh runs it once, after make check), not
# by `make check`: the source report's hang (rank 1 skips a mini-batch in
# step 3, no step markers) reported within 2 s of the blocked work, and with
# CCSHIM_ON_DESYNC=abort the job ended within 5 s.
#
# Why not in make check: these bound how soon a background thread at nice 10
# gets a core, and 4 ranks, their test-NCCL workers and the pollers share 2
# cores with whatever else runs; beside two busy loops (or a parallel make
# check) the bounds measure the scheduler, not the detector.  make check's
# nccl-completion.sh asserts the same verdicts with bounds that only tell a
# detection from a timeout.
. "$top_srcdir/tests/tap.sh"
[ "${CCSHIM_CHECK_TIMING:-0}" = 1 ] || tap_skip_all "latency targets: run by make check-timing"
. "$top_srcdir/tests/nccl/lib.sh"
[ -x "$T" ] || tap_skip_all "ccshim-trainer-nccl not built"
[ -f "$top_builddir/tests/cuda/libcuda.so.1" ] || tap_skip_all "the test CUDA driver is not built"
tap_plan 3

AR='allreduce\(count=[0-9]+, float64, sum\)'
job hang 40 FAKENCCL_TIMEOUT=20 -- --inject=skip-minibatch:1:3 --steps 5
tap_check "hang: the DESYNC naming rank 1" sh -c \
    'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=20: ranks 0,2-3 blocked in $2 at seq 20 for N s; rank 1 at seq 19 \(1 behind, exited\)$"' \
    _ "$(lines hang DESYNC)" "$AR" || diag hang
secs=$(grep -h "^ccshim DESYNC" "$CCS_TMP"/hang/log-*.txt | sed -n 's/.* for \([0-9.]*\) s;.*/\1/p' | sort -n | tail -1)
tap_check "hang: reported within 2 s of the blocked work (${secs:-?} s)" awk -v s="${secs:-99}" 'BEGIN { exit !(s <= 2.0) }'
echo "# figure: nccl hang DESYNC after ${secs:-?} s blocked"

job abort 40 FAKENCCL_TIMEOUT=30 CCSHIM_ON_DESYNC=abort -- --inject=skip-minibatch:1:3 --steps 5
tap_check "abort: the job ended within 5 s, no rank left (took $JOB_WALL s, $JOB_TIMEOUTS left)" \
    awk -v s="$JOB_WALL" -v t="$JOB_TIMEOUTS" 'BEGIN { exit !(s <= 5.0 && t == 0) }'
tap_done
