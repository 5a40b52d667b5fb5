#!/bin/sh
# lifecycle.sh - fork, fatal signals and SIGTERM under the preload (no MPI):
# every process leaves a whole trace with exactly its own records, and the job
# dies of the same signal it would have died of without the shim.
. "$top_srcdir/tests/tap.sh"
prog="$top_builddir/tests/integration/lifecycle"
DUMP="$top_builddir/tests/ccs_trace_dump"
lib="$top_builddir/.libs/libccshim.so"
tap_plan 9
run() { # MODE: runs the program preloaded, trace in $CCS_TMP/MODE; prints the exit status
    env RANK=0 WORLD_SIZE=1 CCSHIM_TRACE_DIR="$CCS_TMP/$1" LD_PRELOAD="$lib" "$prog" "$1" 2>"$CCS_TMP/$1.err"
    echo $?
}
steps_in() { "$DUMP" "$1" | awk -F'\t' '$1=="R" && $5=="step" {printf "%s ", $6}'; }
end_of() { "$DUMP" "$1" | awk -F'\t' '$1=="E" {print $6, $7, $3}' | tail -1; }

rc=$(run fork)
tap_eq "fork: parent and child exit 0" 0 "$rc"
set -- "$CCS_TMP"/fork/*.cctrace
tap_eq "fork: one trace per process" 2 "$#"
parent=$(ls "$CCS_TMP"/fork/*.cctrace | while read -r f; do [ "$(steps_in "$f" | wc -w)" = 4 ] && echo "$f"; done)
child=$(ls "$CCS_TMP"/fork/*.cctrace | while read -r f; do [ "$f" != "$parent" ] && echo "$f"; done)
tap_eq "fork: the parent's trace has its 4 marks (steps 1 2 3 4)" "1 2 3 4 " "$(steps_in "$parent")"
tap_eq "fork: the child's trace has only its own 2 marks (steps 4 5)" "4 5 " "$(steps_in "$child")"

rc=$(run crash)
tap_eq "crash: the process still dies of SIGSEGV" 139 "$rc"
tap_eq "crash: the trace ends with the signal and all 4 records" "signal 11 4" "$(end_of "$CCS_TMP"/crash/*.cctrace)"
tap_check "crash: the summary names the signal" grep -q 'summary (signal 11): 0 collectives.*4 steps' "$CCS_TMP/crash.err"

rc=$(run term)
tap_eq "SIGTERM: the process still dies of SIGTERM" 143 "$rc"
tap_eq "SIGTERM: the trace ends with the signal and both records" "signal 15 2" "$(end_of "$CCS_TMP"/term/*.cctrace)"
tap_done
