#!/bin/sh
# bench/nccl-track-bench.sh - what NCCL completion tracking adds per call
# (bench/ncclhot, on the test CUDA driver): the wrapper's bookkeeping with
# tracking off and on, and the events recorded under the rate limit.
# Writes the figures into docs/performance.md (section nccl-track).
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
ITERS=${ITERS:-10000000}
out=$(LD_LIBRARY_PATH="$top_builddir/tests/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$top_builddir/bench/ncclhot" "$ITERS")
v() { echo "$out" | awk -v k="$1" '$1 == k {print $2}'; }
echo "NCCL wrapper bookkeeping: $(v off_ns) ns tracking off, $(v on_ns) ns on: $(v tracking_added_ns) ns added per call; $(v events) events in $(v calls) calls ($(v seconds) s)"
# Instructions the wrapper adds per ncclAllReduce (bench/nccl_loop on the
# test NCCL, tracking off, desync on): callgrind's self counts of everything
# compiled from ccshim's src/ in the calling thread, for two loop lengths;
# their difference over the difference in calls leaves out the one-time work
# (the clock's calibration, which runs for a time, left out).
ir_nccl="n/a"
if [ "${CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null 2>&1 && command -v callgrind_annotate >/dev/null 2>&1; then
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    for n in 4000 12000; do
        CCSHIM_SUMMARY=0 LD_PRELOAD="$top_builddir/.libs/libccshim.so" valgrind --tool=callgrind \
            --separate-threads=yes --callgrind-out-file="$tmp/cg.$n" "$top_builddir/bench/nccl_loop" "$n" >/dev/null 2>&1
        callgrind_annotate --inclusive=no --auto=no --threshold=100 "$tmp/cg.$n-01" 2>/dev/null |
            awk -v n="$n" '/^ *[0-9,]+ \([ 0-9.]+%\)  / && /\/src\/(core|mpi|nccl|desync|coalesce|trace)\// && !/ccs_clock_/ {
                               gsub(",", "", $1); s += $1} END {print n, s + 0}'
    done > "$tmp/ir"
    ir_nccl=$(awk '{n[NR] = $1; s[NR] = $2} END {printf "%.0f", (s[2] - s[1]) / ((n[2] - n[1]) * 1.1)}' "$tmp/ir")
    echo "instructions per ncclAllReduce added by the wrapper: $ir_nccl"
fi
cpu=$(bench_cpu)
bench_write_section "$top_srcdir/docs/performance.md" nccl-track <<MD
## NCCL completion tracking

Measured by \`make bench\` (bench/nccl-track-bench.sh, bench/ncclhot.c) on $(date -u +%Y-%m-%d),
$(nproc) cores ($cpu), on the test CUDA driver (tests/cuda: its driver calls are plain
function calls, so this is ccshim's own cost; a real driver's cuStreamIsCapturing and
the rate-limited cuEventRecord cost more: tests/gpu/run-device-checks.sh measures them on a GPU).

| what | per call |
| --- | --- |
| empty call | $(v plain_ns) ns |
| NCCL wrapper bookkeeping, tracking off (no CUDA driver in the process) | $(v off_ns) ns |
| same, tracking on (capture query, stream slot, rate-limited event) | $(v on_ns) ns |
| added by tracking | $(v tracking_added_ns) ns |
| instructions per intercepted ncclAllReduce, tracking off (callgrind, bench/nccl_loop on the test NCCL) | $ir_nccl |
| events recorded (rate limit: one per stream per 20 ms period) | $(v events) in $(v calls) calls over $(v seconds) s |

Target: at most 20 ns added per NCCL call on average with the rate limit.
MD
