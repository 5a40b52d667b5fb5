#!/bin/sh
# desync-security.sh - the coordinator under an unauthenticated flood
# (docs/desync.md, "Security"): a healthy 2-rank job on two host identities
# (so the second host's leader talks TCP to the coordinator in rank 0),
# under `ulimit -n 256`, while 300 idle connections and 40 connections
# announcing 4 MiB HELLO frames hit the coordinator's port.  Rank 0's
# descriptors, memory (< 5 MB growth) and log (< 20 lines) stay bounded and
# the job finishes.  `ss -ltn` shows the coordinator on the announced
# address only.  (The reflection attack, replay and a wrong secret are in
# test_tcp.)
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
command -v ss >/dev/null || tap_skip_all "ss (iproute2) not installed"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
tap_plan 9

TWO_HOSTS='CCSHIM_DESYNC_HOST=h$((OMPI_COMM_WORLD_RANK)) exec "$@"'
PORT=$(ccs_ports 2)
D="$CCS_TMP/flood"

# The job, in the background, with few descriptors.  A small ring: the
# recording thread's ring is committed at its first collective (5.6 MB at
# the default size), which may fall in the measured window and is not what
# a peer makes rank 0 spend.
(
    ulimit -n 256
    dsx_run flood 60 2 CCSHIM_RING_SIZE=1024 CCSHIM_DESYNC_TRANSPORT=tcp CCSHIM_COORD=127.0.0.1:$PORT CCSHIM_LOG_LEVEL=info -- \
        sh -c "$TWO_HOSTS" _ "$SCENARIO" healthy 6
    echo "$DSX_RC" >"$CCS_TMP/flood.rc"
) &
job=$!
ccs_wait_listen "$PORT" 20 || true
ss -ltnp "sport = :$PORT" >"$CCS_TMP/ss.txt" 2>&1
tap_check "ss -ltn: the coordinator listens on the announced 127.0.0.1:$PORT only" \
    sh -c "grep -q ' 127.0.0.1:$PORT ' '$CCS_TMP/ss.txt' && ! grep -Eq ' (0\.0\.0\.0|\*|\[::\]):$PORT ' '$CCS_TMP/ss.txt'"
pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$CCS_TMP/ss.txt" | head -1)
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
sleep 1
fd0=$(fds "$pid")
rss0=$(rss "$pid")
python3 "$top_srcdir/tests/desync/flood.py" "$PORT" 300 40 6 >"$CCS_TMP/flood.out" 2>&1 &
flood=$!
fdmax=$fd0
rssmax=$rss0
while kill -0 "$flood" 2>/dev/null; do
    f=$(fds "$pid"); r=$(rss "$pid")
    [ "${f:-0}" -gt "$fdmax" ] && fdmax=$f
    [ "${r:-0}" -gt "$rssmax" ] && rssmax=$r
    sleep 0.2
done
wait "$flood"
wait "$job"
rc=$(cat "$CCS_TMP/flood.rc" 2>/dev/null || echo none)
echo "# rank 0 (pid $pid): fds $fd0 -> max $fdmax, RSS $rss0 -> max $rssmax kB; $(cat "$CCS_TMP/flood.out")" |
    tap_diag
tap_eq "the healthy job finishes (exit 0)" 0 "$rc"
tap_check "rank 0 was found and measured" test -n "$pid" -a "${fd0:-0}" -gt 0
tap_check "rank 0's descriptors grew by at most 40 (the cap on connections awaiting the handshake: 32)" \
    test $((fdmax - fd0)) -le 40
tap_check "rank 0's memory grew by less than 5 MB ($(((rssmax - rss0) / 1024)) MB)" \
    test $((rssmax - rss0)) -lt 5120
lines=$(wc -l <"$D/log-0.txt")
tap_check "rank 0's log stays short ($lines lines < 20)" test "$lines" -lt 20
tap_check "refused peers are summarised, not logged one by one" \
    grep -Eq "desync coordinator: refused [0-9]+ peers in the last [0-9]+ s" "$D/log-0.txt"
tap_check "the second host's leader still authenticated and no verdict was given" \
    sh -c "grep -q 'host leader, coordinator at 127.0.0.1:$PORT' '$D'/log-1.txt && ! grep -Eq '^ccshim (MISMATCH|DESYNC|DEAD) ' '$D'/log-*.txt"
tap_check "the flood saw its connections closed" grep -Eq "closed=[1-9]" "$CCS_TMP/flood.out"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag flood
tap_done
