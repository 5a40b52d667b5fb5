#!/bin/sh
# hygiene.sh - the preload as a careful guest (docs/configuration.md,
# docs/desync.md): processes that record nothing say nothing and leave no
# trace; an overlong CCSHIM_LOG gives one bounded warning; a malformed
# CCSHIM_COORD is warned about in an MPI job; a SIGSEGV under MPI still shows
# Open MPI's own backtrace and leaves a complete trace.
. "$top_srcdir/tests/tap.sh"
lib="$top_builddir/.libs/libccshim.so"
mpilib="$top_builddir/.libs/libccshim-mpi.so"
DUMP="$top_builddir/tests/ccs_trace_dump"
tap_plan 15

# A shell and its children under the preload with a trace directory: no
# summary, no trace.
mkdir -p "$CCS_TMP/quiet"
env RANK=0 WORLD_SIZE=2 CCSHIM_TRACE_DIR="$CCS_TMP/quiet" LD_PRELOAD="$lib" \
    sh -c '/bin/true; ls / >/dev/null; (sleep 0 &); wait' >"$CCS_TMP/quiet.out" 2>"$CCS_TMP/quiet.err"
tap_eq "processes that record nothing print nothing" "" "$(cat "$CCS_TMP/quiet.err")"
tap_eq "... and write no trace" 0 "$(ls "$CCS_TMP/quiet" | wc -l)"

# A 5000-character CCSHIM_LOG: one warning, cut, naming what was expected.
long="$CCS_TMP/$(printf '%05000d' 0 | tr 0 a)"
env CCSHIM_LOG="$long" LD_PRELOAD="$lib" /bin/true 2>"$CCS_TMP/log.err"
tap_eq "a 5000-character CCSHIM_LOG gives exactly one line" 1 "$(wc -l <"$CCS_TMP/log.err")"
tap_check "... a warning, cut with a marker, under 1 KiB" \
    sh -c "grep -q '^ccshim\[-1@[^]]*\]: warning: CCSHIM_LOG=.*\.\.\.\[truncated\].*expands to more than 4095 bytes; logging to stderr$' '$CCS_TMP/log.err' && test \$(wc -c <'$CCS_TMP/log.err') -lt 1024"
long_level=$(printf '%0600d' 0 | tr 0 x)
env CCSHIM_LOG_LEVEL="$long_level" LD_PRELOAD="$lib" /bin/true 2>"$CCS_TMP/level.err"
tap_check "a 600-character bad value is cut before the expected part, not after" \
    grep -q "CCSHIM_LOG_LEVEL='x*\.\.\.\[truncated\]' ignored: expected one of: error warn info debug; using the default 'warn'$" \
    "$CCS_TMP/level.err"

# A disk that fills up (a 40000-byte file size limit, SIGXFSZ ignored as
# a full disk would give ENOSPC): the summary does not name the trace, and
# the reader salvages the whole records of the cut chunk and says how many
# were lost.
mkdir -p "$CCS_TMP/full"
if command -v prlimit >/dev/null; then
    env RANK=0 WORLD_SIZE=1 CCSHIM_TRACE_DIR="$CCS_TMP/full" LD_PRELOAD="$lib" \
        sh -c "trap '' XFSZ; exec prlimit --fsize=40000 '$top_builddir/tests/integration/lifecycle' many" \
        2>"$CCS_TMP/full.err"
    tap_check "full disk: the summary says the trace was not written" \
        grep -q "summary: 0 collectives, 0 point-to-point (none), 10000 steps, trace off (not written), 0 dropped" \
        "$CCS_TMP/full.err"
    t=$(ls "$CCS_TMP"/full/*.cctrace 2>/dev/null | head -1)
    "$DUMP" "$t" >"$CCS_TMP/full.dump" 2>"$CCS_TMP/full.dump.err"
    n=$(awk -F'\t' '$1=="R"' "$CCS_TMP/full.dump" | wc -l)
    tap_check "full disk: the readable records of the cut chunk are read ($n)" test "$n" -gt 400
    tap_check "full disk: the reader says how many were lost" \
        grep -Eq "truncated: the file ends inside a chunk of [0-9]+ records; $n read, [0-9]+ lost" "$CCS_TMP/full.dump.err"
else
    for i in 1 2 3; do tap_skip "prlimit (util-linux) not installed"; done
fi

if ! ccs_have_mpi; then
    for i in 1 2 3 4 5 6 7; do tap_skip "MPI not available"; done
    tap_done
    exit 0
fi
prog="$top_builddir/tests/integration/mpi_crash"
ccs_mpirun 60 2 env CCSHIM_COORD=abc LD_PRELOAD="$mpilib" "$prog" >"$CCS_TMP/coord.out" 2>&1
tap_check "a malformed CCSHIM_COORD is warned about in an MPI job" \
    grep -q "CCSHIM_COORD='abc' ignored: expected host:port with a port in 0..65535" "$CCS_TMP/coord.out"

mkdir -p "$CCS_TMP/crash"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$CCS_TMP/crash" LD_PRELOAD="$mpilib" "$prog" segv >"$CCS_TMP/crash.out" 2>&1
rc=$?
tap_check "SIGSEGV: the job fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
tap_check "SIGSEGV: Open MPI's own backtrace is still printed" \
    sh -c "grep -q '\*\*\* Process received signal \*\*\*' '$CCS_TMP/crash.out' && grep -q 'Signal: Segmentation fault (11)' '$CCS_TMP/crash.out' && grep -q '\*\*\* End of error message \*\*\*' '$CCS_TMP/crash.out'"
t1=$(ls "$CCS_TMP"/crash/*-r1-*.cctrace 2>/dev/null | head -1)
end=$([ -n "$t1" ] && "$DUMP" "$t1" | awk -F'\t' '$1=="E" {print $6, $7}')
tap_eq "SIGSEGV: rank 1's trace ends with the signal" "signal 11" "$end"
tap_eq "SIGSEGV: ... and holds all 5 all-reduces" 5 \
    "$([ -n "$t1" ] && "$DUMP" "$t1" | awk -F'\t' '$1=="R" && $5=="allreduce"' | wc -l)"
# The application's own handler, installed before MPI_Init, stays first and
# alone: it runs, and ccshim neither flushes nor prints a signal summary.
mkdir -p "$CCS_TMP/own"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$CCS_TMP/own" LD_PRELOAD="$mpilib" "$prog" own >"$CCS_TMP/own.out" 2>&1
tap_check "own handler: the application's SIGSEGV handler runs" \
    grep -q "mpi_crash: the application's own handler ran" "$CCS_TMP/own.out"
tap_check "own handler: ccshim's handler did not run before it (no SIGSEGV summary from rank 1)" \
    sh -c "! grep -q 'summary (signal 11)' '$CCS_TMP/own.out'"
[ "$TAP_FAILED" -eq 0 ] || { for f in "$CCS_TMP"/*.err "$CCS_TMP"/*.out; do echo "--- $f"; head -30 "$f"; done | tap_diag; }
tap_done
