#!/bin/sh
# desync-tcp.sh - the cases again with the ranks on two hosts: ranks 0-1 on
# host identity h0 and 2-3 on h1 (CCSHIM_DESYNC_HOST), so each pair shares
# memory and the pairs talk over TCP through the coordinator in rank 0, on
# loopback.  (The handshake, a wrong secret and malformed frames are
# covered by test_tcp.)
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
tap_plan 19

# Bounds that hold on 2 shared cores: a verdict while the job runs, not at
# its end (the latency targets: make check-timing, make bench).  A
# mismatched call completes, so the ranks wait MSETTLE before MPI_Finalize:
# the abort ends the job at the verdict.
SETTLE=600
MSETTLE=5000
LATE=10000
AR='allreduce\(count=4, float32, sum\)'
TWO_HOSTS='CCSHIM_DESYNC_HOST=h$((OMPI_COMM_WORLD_RANK / 2)) exec "$@"'

tcp_case() { # NAME SCENARIO CULPRIT CLASS REGEX MAX_MS
    local name=$1 sc=$2 culprit=$3 cls=$4 re=$5 max=$6 lat
    local settle=$SETTLE
    [ "$cls" = MISMATCH ] && settle=$MSETTLE
    dsx_run "$name" 40 4 CCSHIM_ON_DESYNC=abort CCSHIM_COORD=127.0.0.1:0 CCSHIM_LOG_LEVEL=info SETTLE_MS=$settle -- \
        sh -c "$TWO_HOSTS" _ "$SCENARIO" "$sc" 5 2 "$culprit"
    dsx_check_verdict "$name" "$cls" "$re"
    # One rank of each host logs the verdict, one rank of the job in full.
    tap_eq "$name: one line on each host, one full report" "1 1 one-report-per-verdict" \
        "$(dsx_per_host "$name" "$cls" "0 1" "2 3")"
    lat=$(dsx_latency_ms "$name" "$cls")
    tap_check "$name: reported $lat ms after the culprit's call (<= $max)" test "$lat" -le "$max"
}

# Rank 1 (on h0) skips: the ranks that wait are on both hosts.
tcp_case tcp-skip skip 1 DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=5: ranks 0,2-3 blocked in $AR at seq 5 for N s; rank 1 at seq 4 \(1 behind, in MPI_Finalize\)$" $((SETTLE + LATE))
# Rank 2 (on h1, whose other rank agrees with it by count only) reduces with MAX.
tcp_case tcp-op op 2 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 2 issued allreduce\(count=4, float32, max\) where ranks 0-1,3 issued $AR$" $MSETTLE
# Rank 3 exits early.
tcp_case tcp-exit exit 3 DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=3: ranks 0-2 blocked in $AR at seq 3 for N s; rank 3 at seq 2 \(1 behind, exited\)$" $LATE
# The coordinator's verdict is reported in full once, by rank 0, on either host.
tap_eq "tcp-op: one block in the combined output of both hosts, in rank 0's log" "1 1" \
    "$(cat "$CCS_TMP/tcp-op"/log-*.txt | grep -c '^ccshim desync| comm ') $(grep -c '^ccshim desync| comm ' "$CCS_TMP/tcp-op/log-0.txt")"
tap_check "the coordinator and both leaders were in use" \
    sh -c "grep -q 'coordinator at 127.0.0.1:' '$CCS_TMP/tcp-skip'/log-*.txt"
# The coordinator's port (CCSHIM_COORD) held by another program for 3 s
# when rank 0 starts it: never silently off.  Rank 0 says it cannot listen
# and tries again every 2 s, the address goes out all the same, the leaders
# keep connecting, and once the port is free the DESYNC of rank 1 skipping
# is seen on both hosts.  (Before: "cannot start the coordinator ...
# detection across hosts is off" for good, and only h0 saw the hang.)
held="$CCS_TMP/held"
mkdir -p "$held"
python3 - "$held/port" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1] + ".tmp", "w").write("%d\n" % s.getsockname()[1])
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3)
PY
holder=$!
for _ in $(seq 50); do [ -s "$held/port" ] && break; sleep 0.1; done
hp=$(cat "$held/port" 2>/dev/null || echo 0)
dsx_run tcp-busy 40 4 CCSHIM_ON_DESYNC=abort CCSHIM_COORD=127.0.0.1:$hp CCSHIM_LOG_LEVEL=info SETTLE_MS=$SETTLE -- \
    sh -c "$TWO_HOSTS" _ "$SCENARIO" skip 5 2 1
wait "$holder" 2>/dev/null
dsx_check_verdict tcp-busy DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=5: ranks 0,2-3 blocked in $AR at seq 5 for N s; rank 1 at seq 4 \(1 behind, in MPI_Finalize\)$"
tap_check "tcp-busy: seen on both hosts" sh -c "grep -ql '^ccshim DESYNC ' '$CCS_TMP/tcp-busy/log-2.txt' '$CCS_TMP/tcp-busy/log-3.txt'"
tap_eq "tcp-busy: rank 0 says it cannot listen and tries again" 1 \
    "$(grep -c "desync: cannot start the coordinator on 127.0.0.1 (port $hp): cannot listen on 127.0.0.1:$hp: Address already in use; trying again every 2 s (detection across hosts waits for it; within each host it is on)" "$CCS_TMP/tcp-busy/log-0.txt")"
tap_check "tcp-busy: then that it listens" grep -Eq "desync: the coordinator listens on 127.0.0.1:$hp after [0-9.]+ s \([0-9]+ attempts\); detection across hosts is on" "$CCS_TMP/tcp-busy/log-0.txt"
tap_done
