#!/bin/sh
# desync-netfault.sh - the side channel under network faults (docs/desync.md,
# "Security"): a 2-rank MPI job, each rank its own host identity, rank 1's
# leader reaching the coordinator in rank 0 through a TCP proxy
# (faultproxy.py) that resets the connection, drops one frame, flips one
# bit and stalls 12 s.  Under CCSHIM_ON_DESYNC=abort the healthy job ends
# with exit 0 and no verdict (a lost connection makes ranks unreachable, not
# dead; the leader reconnects); a real MISMATCH after a reset is still
# reported on both hosts; a rank killed alone on its host (its connection
# closes: no evidence of death) is named unreachable once rank 0 has waited
# on it for the grace period, not DEAD.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
command -v ss >/dev/null || tap_skip_all "ss (iproute2) not installed"
tap_plan 15

PORT=$(ccs_ports 2)
PPORT=$((PORT + 1))
# Rank 0 listens on PORT; rank 1 (host h1) reaches it through the proxy.
VIA='if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then c=$P0; else c=$P1; fi; CCSHIM_DESYNC_HOST=h$OMPI_COMM_WORLD_RANK CCSHIM_COORD=127.0.0.1:$c exec "$@"'

proxy() { # NAME EVENTS...: the proxy in the background, its output in NAME/proxy.txt
    local name=$1; shift
    mkdir -p "$CCS_TMP/$name"
    python3 "$top_srcdir/tests/desync/faultproxy.py" "$PPORT" "$PORT" "$@" >"$CCS_TMP/$name/proxy.txt" 2>&1 &
    PROXY=$!
    # The job starts once the proxy listens (a leader refused at its first
    # connection only retries later); if it never does, its output says why.
    ccs_wait_listen "$PPORT" 10 ||
        { echo "# the proxy does not listen on $PPORT after 10 s:"; tap_diag <"$CCS_TMP/$name/proxy.txt"; }
}
proxy_stop() { kill "$PROXY" 2>/dev/null; wait "$PROXY" 2>/dev/null; }

# A healthy job of about 28 s (one rank computes 1.2-2.5 s per iteration):
# reset at 2 s, one STATUS frame dropped at 5 s, one bit flipped at 8 s,
# a 12 s stall from 11 s (past the 10 s heartbeat).
proxy nf-healthy 2:reset 5:drop 8:flip 11:stall:12
dsx_run nf-healthy 90 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT P1=$PPORT \
    CCSHIM_LOG_LEVEL=info -- sh -c "$VIA" _ "$SCENARIO" healthy 15
proxy_stop
cat "$CCS_TMP/nf-healthy/proxy.txt" | tap_diag
tap_eq "nf-healthy: the job ends normally under abort (exit 0)" 0 "$DSX_RC"
tap_eq "nf-healthy: no MISMATCH, DESYNC or DEAD" "" \
    "$(cat "$CCS_TMP/nf-healthy"/log-*.txt 2>/dev/null | grep -E '^ccshim (MISMATCH|DESYNC|DEAD) ' || true)"
tap_check "nf-healthy: all four faults were applied (reset, drop, flip, stall)" sh -c \
    "grep -q 'reset connection' '$CCS_TMP/nf-healthy/proxy.txt' && grep -q 'dropped a STATUS' '$CCS_TMP/nf-healthy/proxy.txt' &&
     grep -q 'flipped a bit' '$CCS_TMP/nf-healthy/proxy.txt' && grep -q 'stall connection' '$CCS_TMP/nf-healthy/proxy.txt'"
n=$(sed -n 's/^connections=//p' "$CCS_TMP/nf-healthy/proxy.txt")
tap_check "nf-healthy: the leader reconnected after each closing fault (${n:-0} connections >= 4)" test "${n:-0}" -ge 4
tap_check "nf-healthy: the coordinator said the dropped leader's ranks are unreachable" \
    grep -q "its ranks are unreachable until it reconnects" "$CCS_TMP/nf-healthy/log-0.txt"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag nf-healthy

# A real MISMATCH (rank 1 reduces with MAX at iteration 5, about 3 s in)
# after a reset at 1 s: reported, on both hosts, and the job aborted.
proxy nf-mismatch 1:reset
dsx_run nf-mismatch 60 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT P1=$PPORT ITER_MS=500 \
    CCSHIM_LOG_LEVEL=info -- sh -c "$VIA" _ "$SCENARIO" op 8 5 1
proxy_stop
cat "$CCS_TMP/nf-mismatch/proxy.txt" | tap_diag
dsx_check_verdict nf-mismatch MISMATCH \
    "^ccshim MISMATCH comm=0x[0-9a-f]+ size=2 seq=6: rank 0 issued allreduce\(count=4, float32, sum\), rank 1 issued allreduce\(count=4, float32, max\)$"
tap_check "nf-mismatch: seen on both hosts, after the reset" sh -c \
    "grep -q '^ccshim MISMATCH ' '$CCS_TMP/nf-mismatch/log-0.txt' && grep -q '^ccshim MISMATCH ' '$CCS_TMP/nf-mismatch/log-1.txt' && grep -q 'reset connection' '$CCS_TMP/nf-mismatch/proxy.txt'"

# A partition and a real hang: the proxy resets rank 1's connection 1.5 s
# in and refuses it from then on; about 3 s in rank 1, alone on h1, enters a
# barrier nobody else reaches while rank 0 waits in the all-reduce.  Nothing
# shows rank 1's process gone, so with a 2 s heartbeat (the grace) rank 0's
# side names it unreachable, not dead.
proxy nf-lost 1.5:down
dsx_run nf-lost 60 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT P1=$PPORT ITER_MS=1000 \
    CCSHIM_DESYNC_HEARTBEAT_MS=2000 CCSHIM_LOG_LEVEL=info -- sh -c "$VIA" _ "$SCENARIO" deadlock 6 3 1
proxy_stop
cat "$CCS_TMP/nf-lost/proxy.txt" | tap_diag
dsx_check_verdict nf-lost DESYNC \
    "^ccshim DESYNC comm=0x[0-9a-f]+ size=2 seq=[0-9]+: rank 0 blocked in allreduce\(count=4, float32, sum\) at seq [0-9]+ for N s; rank 1 unreachable \(host 'h1': no word from its leader for N s; last seen at seq [0-9]+; not known to be dead\)$"
tap_eq "nf-lost: no DEAD verdict (nothing showed rank 1's pid gone)" "" "$(dsx_lines nf-lost DEAD)"

# A host that falls silent (its rank stopped with SIGSTOP, the connection
# open), with a 2 s heartbeat: its link is dropped a heartbeat into the
# silence, and it is named only after twice that (4 s) of silence from its
# last word, saying that silence; a stop of 3 s (1.5 heartbeats, as 15 s
# with the default 10 s) passes without a verdict.  (Before: the grace ran
# from the drop, and the line said "no word for 2.0 s" after 4 s.)
# (Rank 1 is stopped 1 s after its log says detection is on, whatever
# its start-up took.)
STOPPED='if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then CCSHIM_DESYNC_HOST=h0 CCSHIM_COORD=127.0.0.1:$P0 exec "$@"; fi
CCSHIM_DESYNC_HOST=h1 CCSHIM_COORD=127.0.0.1:$P0 "$@" & p=$!
l=$(echo "$CCSHIM_LOG" | sed "s/%r/1/"); i=0
while ! grep -q "desync detection on" "$l" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1; kill -STOP $p; sleep $STOP_S; kill -CONT $p; wait $p'
dsx_run nf-stop3 60 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT STOP_S=3 ITER_MS=500 \
    CCSHIM_DESYNC_HEARTBEAT_MS=2000 CCSHIM_LOG_LEVEL=info -- sh -c "$STOPPED" _ "$SCENARIO" ok 16
tap_eq "nf-stop3: a host silent 3 s (1.5 heartbeats) comes back: exit 0, no MISMATCH, DESYNC or DEAD" "0 " \
    "$DSX_RC $(cat "$CCS_TMP/nf-stop3"/log-*.txt 2>/dev/null | grep -E '^ccshim (MISMATCH|DESYNC|DEAD) ' || true)"
tap_check "nf-stop3: its link was dropped meanwhile (the stop was long enough to matter)" \
    grep -q "no frame within the heartbeat period (a stalled link)" "$CCS_TMP/nf-stop3/log-0.txt"
dsx_run nf-stop12 60 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT STOP_S=12 ITER_MS=500 \
    CCSHIM_DESYNC_HEARTBEAT_MS=2000 CCSHIM_LOG_LEVEL=info -- sh -c "$STOPPED" _ "$SCENARIO" ok 16
silence=$(cat "$CCS_TMP/nf-stop12"/log-0.txt 2>/dev/null | sed -n "s/^ccshim DESYNC .*rank 1 unreachable (host 'h1': no word from its leader for \([0-9.]*\) s;.*/\1/p" | head -1)
tap_check "nf-stop12: a host silent 12 s is named unreachable, and the job ends (exit $DSX_RC)" \
    sh -c '[ -n "$1" ] && [ "$2" -ne 0 ] && [ "$2" -ne 124 ]' _ "$silence" "$DSX_RC"
tap_check "nf-stop12: ... after the silence it says (${silence:-none} s), twice the heartbeat: 4.0 to 6.0 s" \
    awk -v s="${silence:-0}" 'BEGIN { exit !(s >= 4.0 && s < 6.0) }'
tap_done
