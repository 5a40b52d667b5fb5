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
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
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
| events recorded (rate limit: one per stream per 20 ms period) | $(v events) in $(v calls) calls over $(v seconds) s |

Target: at most 20 ns added per NCCL call on average with the rate limit.
MD
