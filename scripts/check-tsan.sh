#!/usr/bin/env bash
# scripts/check-tsan.sh - ThreadSanitizer over the preload library (`make
# check-tsan`): builds libccshim-mpi.so, the MPI_THREAD_MULTIPLE pattern
# test and the desync scenario with -fsanitize=thread in a build directory of
# their own, runs them on 2 ranks with the desync thread and the trace writer
# on (ranks blocked in collectives while the desync thread copies their
# in-flight records), then a silent MISMATCH on 3 ranks (the host's search
# and a verdict shared through shared memory), and fails if ThreadSanitizer
# reports a race with a frame in ccshim's sources, or the MISMATCH is not
# seen by all 3 ranks.  Races wholly inside the (uninstrumented) MPI
# library are not ccshim's and are suppressed (tests/tsan.supp).
# Environment: CCSHIM_TSAN_BUILD (default _tsan in the source tree).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CCSHIM_TSAN_BUILD:-$top/_tsan}
command -v mpirun >/dev/null || { echo "check-tsan: no mpirun; skipped"; exit 77; }
echo 'int main(void){return 0;}' >"/tmp/ccshim-tsan-probe.$$.c"
if ! gcc -fsanitize=thread "/tmp/ccshim-tsan-probe.$$.c" -o "/tmp/ccshim-tsan-probe.$$" 2>/dev/null; then
    rm -f "/tmp/ccshim-tsan-probe.$$"*
    echo "check-tsan: the compiler cannot build with -fsanitize=thread (libtsan missing); skipped"
    exit 77
fi
rm -f "/tmp/ccshim-tsan-probe.$$"*
mkdir -p "$build"
cd "$build" || exit 1
if [ ! -f Makefile ]; then
    "$top/configure" --quiet CFLAGS="-g -O1 -fsanitize=thread -fno-omit-frame-pointer" \
        LDFLAGS="-fsanitize=thread" >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
fi
make -j2 libccshim-mpi.la tests/integration/mpi_pattern tests/desync/desync_scenario >make.log 2>&1 ||
    { tail -30 make.log; exit 1; }
tsan=$(gcc -print-file-name=libtsan.so)
tsan=$(readlink -f "$tsan")
logs="$build/tsan-logs"
rm -rf "$logs" "$build/trace"
mkdir -p "$logs" "$build/trace"
export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp log_path=$logs/tsan history_size=4 exitcode=0 report_signal_unsafe=0"
run() { # NAME NP PROGRAM ARGS...
    local name=$1 np=$2; shift 2
    timeout 300 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader \
        --mca btl_vader_single_copy_mechanism none -np "$np" \
        -x TSAN_OPTIONS -x LD_PRELOAD="$tsan:$build/.libs/libccshim-mpi.so" \
        -x CCSHIM_TRACE_DIR="$build/trace" -x CCSHIM_SUMMARY=0 -x CCSHIM_JOB_ID="tsan-$name" \
        "$@" >"$logs/$name.out" 2>&1
    echo "check-tsan: $name: exit $?"
}
run pattern 2 "$build/tests/integration/mpi_pattern"
run blocked 2 "$build/tests/desync/desync_scenario" healthy 3
# A silent MISMATCH found while the ranks run (rank 1 takes MPI_MAX at seq 51
# of 300, 10 ms apart): the host's search, its probes through shared memory,
# the verdict shared and reported by every rank.
run mismatch 3 env ITER_MS=10 SETTLE_MS=300 "$build/tests/desync/desync_scenario" op 300 50
seen=$(grep -c '^ccshim MISMATCH .* seq=51: rank 1 ' "$logs/mismatch.out")
echo "check-tsan: mismatch: seen by $seen of 3 ranks"
# Reports with a frame in ccshim's sources (src/, under its own directory).
ours=0 total=0
for f in "$logs"/tsan.*; do
    [ -f "$f" ] || continue
    n=$(grep -c '^WARNING: ThreadSanitizer' "$f")
    total=$((total + n))
    # A data race is ccshim's when one of its two accesses (a "#0" frame)
    # is in ccshim's sources.  (Lock-order and mutex reports inside the MPI
    # library's PMIx component are not ccshim's and are not counted.)
    m=$(awk -v src="$top/src/" '/^WARNING: ThreadSanitizer: data race/ {inrep=1; hit=0}
             inrep && /^ +#0 / && index($0, src) {hit=1}
             /^SUMMARY: ThreadSanitizer/ {if (inrep && hit) n++; inrep=0} END {print n+0}' "$f")
    ours=$((ours + m))
    [ "$m" -gt 0 ] && { echo "--- $f"; cat "$f"; }
done
echo "check-tsan: $total ThreadSanitizer reports, $ours data races in ccshim's code"
[ "$ours" -eq 0 ] && [ "$seen" -eq 3 ]
