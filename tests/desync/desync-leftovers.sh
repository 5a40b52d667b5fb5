#!/bin/sh
# desync-leftovers.sh - the shared-memory segments a job leaves in /dev/shm
# (issue 45).  With CCSHIM_DESYNC_HOST the ranks of a host identity do not
# know how many they are, so they cannot remove the segment's name once all
# attached: a job whose ranks were killed left its 380 KB segment for good.
# Now the next job of the same user on the host removes it (no process holds
# its lock), never the segment of a job still running; a healthy job leaves
# none.  Two ranks of ccshim-trainer-nccl on the test NCCL, started as
# torchrun would, on host identity hX.
. "$top_srcdir/tests/tap.sh"
T="$top_builddir/ccshim-trainer-nccl"
{ [ -x "$T" ] && [ -f "$top_builddir/tests/nccl/libnccl.so.2" ]; } || tap_skip_all "ccshim-trainer-nccl or the test NCCL not built"
[ -d /dev/shm ] || tap_skip_all "no /dev/shm"
tap_plan 8

# start NAME STEPS: the job's 2 ranks in the background, each in a session
# of its own (PIDS, killed at the end if still there).
start() {
    local d="$CCS_TMP/$1" r
    mkdir -p "$d"
    PIDS=""
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 \
            CCSHIM_DESYNC_HOST=hX CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_LOG_LEVEL=info \
            LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            setsid "$CCSHIM_RUN" --no-mpi -- "$T" --device host --nccl-id-file "$d/id" --steps "$2" \
            > "$d/out-$r" 2>&1 &
        PIDS="$PIDS $!"
        CCS_PGIDS="$CCS_PGIDS $!"
    done
}

# segment PID: the desync segment process PID maps, waited for (10 s at most).
segment() {
    local i=0 s=""
    while [ $i -lt 100 ]; do
        s=$(grep -o '/dev/shm/ccshim-dsx-[0-9a-f-]*' "/proc/$1/maps" 2>/dev/null | sort -u | head -1)
        [ -n "$s" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    echo "$s"
}

# waitall: waits for PIDS (60 s at most each); RCS their exit statuses.
waitall() {
    local p i
    RCS=""
    for p in $PIDS; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$p" 2>/dev/null
        wait "$p"
        RCS="$RCS $?"
    done
}

# A job that keeps running meanwhile: its segment is never taken.
start running 100000000
C=$(segment $(echo $PIDS | cut -d" " -f1))
CPIDS=$PIDS

# A job killed in its run (SIGKILL, as the out-of-memory killer or a
# scheduler's hard limit would): its segment stays, for now.
start killed 100000000
A=$(segment $(echo $PIDS | cut -d" " -f1))
APIDS=$PIDS
for p in $APIDS; do kill -KILL "$p"; done
for p in $APIDS; do wait "$p" 2>/dev/null; done
tap_check "a killed job's segment is there after it ($A)" test -n "$A" -a -f "$A"

# The next job of the user: removes the killed job's segment, says so
# once, and leaves none of its own.
start healthy 300
B=$(segment $(echo $PIDS | cut -d" " -f1))
waitall
tap_eq "the next job runs (exit statuses)" " 0 0" "$RCS"
tap_check "... it removed the killed job's segment" test ! -e "$A"
# (At least one line: a test run beside this one may leave a killed job's
# segment too, and one rank may remove it and the other this one's.)
tap_check "... and said so, at info level" sh -c \
    "cat '$CCS_TMP/healthy'/log-*.txt | grep -q 'desync: removed [0-9]* shared-memory segments\{0,1\} of this user.s jobs that were killed (no process in them: /dev/shm/ccshim-dsx-[0-9]*-\*)$'"
tap_check "a healthy job leaves no segment ($B)" test -n "$B" -a ! -e "$B"
tap_check "the running job's segment is still there ($C)" test -n "$C" -a -f "$C"
alive=0
for p in $CPIDS; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
tap_eq "... and its ranks still run" 2 "$alive"
tap_eq "... with no warning" "" "$(grep -h 'warning' "$CCS_TMP/running"/log-*.txt 2>/dev/null || true)"
for p in $CPIDS; do kill -KILL "$p"; done
for p in $CPIDS; do wait "$p" 2>/dev/null; done
rm -f "$C" # (what the next job would remove)
tap_done
