#!/bin/sh
# desync-tree.sh - the tree of relays in a real job (docs/desync.md, "The
# tree"): 8 ranks on four host identities of 2 (CCSHIM_DESYNC_HOST h0..h3)
# over TCP on loopback, the tree on at this size (CCSHIM_DESYNC_TREE=on)
# with groups of 4 ranks: the coordinator in rank 0 appoints the leader of
# h0 the relay of group 0 (h0, h1) and the leader of h2 that of group 1
# (h2, h3), and sends the leaders of h1 and h3 to them; the root receives
# the two groups' folds only.  Healthy: no verdict and the tree in use; a
# MISMATCH and a DESYNC whose culprit reports through the relay, named on
# every host; a hang in a communicator inside group 1, judged by the
# relay's own rules; the relay's process killed: DEAD for it alone, its
# group re-parented to a new relay; the link to the relay reset (a proxy in
# between): the leader reports to the root again, no verdict; the relay's
# own link to the root reset: it reconnects and relays again, no verdict.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
command -v ss >/dev/null || tap_skip_all "ss (iproute2) not installed"
tap_plan 31

AR='allreduce\(count=4, float32, sum\)'
FOUR_HOSTS='CCSHIM_DESYNC_HOST=h$((OMPI_COMM_WORLD_RANK / 2)) exec "$@"'
TREE="CCSHIM_COORD=127.0.0.1:0 CCSHIM_LOG_LEVEL=info CCSHIM_DESYNC_TREE=on CCSHIM_DESYNC_RELAY_RANKS=4"
HOSTS="0 1|2 3|4 5|6 7"

tree_run() { # NAME SECS ENV... -- SCENARIO ARGS...
    local name=$1 secs=$2 envs=""
    shift 2
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    dsx_run "$name" "$secs" 8 $TREE $envs -- sh -c "${WRAP:-$FOUR_HOSTS}" _ "$SCENARIO" "$@"
}
logs() { cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null; }
# proxy_start NAME EVENTS...: faultproxy.py from PPORT to PORT (two fresh
# ports) in the background, its output in NAME/proxy.txt; proxy_stop NAME.
proxy_start() {
    local name=$1
    shift
    PORT=$(ccs_ports 2)
    PPORT=$((PORT + 1))
    mkdir -p "$CCS_TMP/$name"
    python3 "$top_srcdir/tests/desync/faultproxy.py" "$PPORT" "$PORT" "$@" >"$CCS_TMP/$name/proxy.txt" 2>&1 &
    PROXY=$!
    ccs_wait_listen "$PPORT" 10 || { echo "# the proxy does not listen on $PPORT:"; tap_diag <"$CCS_TMP/$name/proxy.txt"; }
}
proxy_stop() {
    kill "$PROXY" 2>/dev/null
    wait "$PROXY" 2>/dev/null
    tap_diag <"$CCS_TMP/$1/proxy.txt"
}
verdicts() { logs "$1" | grep -E '^ccshim (MISMATCH|DESYNC|DEAD) ' || true; }
# per_host NAME CLASS: how many lines of CLASS each host's ranks logged.
per_host() {
    local IFS='|' h r n out=""
    for h in $HOSTS; do
        n=0
        IFS=' '
        for r in $h; do n=$((n + $(grep -c "^ccshim $2 " "$CCS_TMP/$1/log-$r.txt" 2>/dev/null || true))); done
        IFS='|'
        out="$out$n "
    done
    echo "${out% }"
}

# Healthy: rank 6 (h3, through the relay) computes 1.5 s in iteration 2
# while the others wait; exit 0 under abort, no verdict, the tree in use.
tree_run tr-healthy 60 CCSHIM_ON_DESYNC=abort ITER_MS=100 COMPUTE_MS=1500 -- compute 12 2 6
tap_eq "tr-healthy: exit 0 under abort" 0 "$DSX_RC"
tap_eq "tr-healthy: no MISMATCH, DESYNC or DEAD" "" "$(verdicts tr-healthy)"
tap_check "tr-healthy: the coordinator appointed h2's leader the relay of group 1" sh -c \
    "grep -Eq 'desync tree: rank [45] \\(host .h2.\\) relays group 1 \\(hosts whose lowest rank is in 4\\.\\.7\\) at 127\\.0\\.0\\.1:[0-9]+$' '$CCS_TMP/tr-healthy/log-0.txt'"
tap_check "tr-healthy: h3's leader reports through it" sh -c \
    "cat '$CCS_TMP/tr-healthy'/log-6.txt '$CCS_TMP/tr-healthy'/log-7.txt | grep -Eq \"host 'h3' reports through the relay of group 1 \\(rank [45] at 127\\.0\\.0\\.1:[0-9]+\\)\""
tap_check "tr-healthy: h0's leader relays group 0 and h1's leader reports through it" sh -c \
    "grep -Eq 'desync tree: rank [01] \\(host .h0.\\) relays group 0 \\(hosts whose lowest rank is in 0\\.\\.3\\)' '$CCS_TMP/tr-healthy/log-0.txt' &&
     cat '$CCS_TMP/tr-healthy'/log-2.txt '$CCS_TMP/tr-healthy'/log-3.txt | grep -Eq \"host 'h1' reports through the relay of group 0 \\(rank [01] at\""
[ "$TAP_FAILED" -eq 0 ] || dsx_diag tr-healthy

# Rank 7 (h3) reduces with MAX at iteration 2: its records reach the root
# through the relay; one line on each host, the job aborted.  The others
# named are those whose records of the seq reached the root within the
# rules' wait (all of 0-6 on an idle machine; a subset beside two busy
# loops), never rank 7.
tree_run tr-op 60 CCSHIM_ON_DESYNC=abort SETTLE_MS=5000 -- op 5 2 7
dsx_check_verdict tr-op MISMATCH \
    "^ccshim MISMATCH comm=0x[0-9a-f]+ size=8 seq=3: rank 7 issued allreduce\\(count=4, float32, max\\) where ranks [0-6,-]+ issued $AR$"
tap_eq "tr-op: one line on each host" "1 1 1 1" "$(per_host tr-op MISMATCH)"

# Rank 6 (h3) skips an all-reduce: the others hang in the last one.  The
# line names a reference of each group and counts the members its fold
# says are blocked like it ("ranks 0,4 and 5 more").
tree_run tr-skip 60 CCSHIM_ON_DESYNC=abort -- skip 5 2 6
dsx_check_verdict tr-skip DESYNC \
    "^ccshim DESYNC comm=0x[0-9a-f]+ size=8 seq=5: ranks [0-9,-]+ and [0-9]+ more blocked in $AR at seq 5 for N s; rank 6 at seq 4 \\(1 behind, in MPI_Finalize\\)$"
tap_eq "tr-skip: one line on each host" "1 1 1 1" "$(per_host tr-skip DESYNC)"

# A communicator inside group 1 (MPI_COMM_WORLD split at rank 4): rank 6
# skips in it.  No fold carries it to the root: the relay's own rules
# judge it, and the root gives the verdict to every host.
tree_run tr-split 60 CCSHIM_ON_DESYNC=abort SPLIT_AT=4 -- split 5 2 6
dsx_check_verdict tr-split DESYNC \
    "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=5: ranks 4-5,7 blocked in $AR at seq 5 for N s; rank 6 at seq 4 \\(1 behind, in MPI_Finalize\\)$"
tap_eq "tr-split: one line on each host" "1 1 1 1" "$(per_host tr-split DESYNC)"

# The relay's process (h2's leader, rank 4 or 5) killed 1 s after it says
# it relays (its pid in that line), in a 6 s job: DEAD names it and no one
# else; h3's leader goes back to the coordinator and on to the next relay
# of group 1, which the coordinator appoints.
(
    i=0
    while [ $i -lt 300 ]; do
        line=$(cat "$CCS_TMP/tr-kill"/log-4.txt "$CCS_TMP/tr-kill"/log-5.txt 2>/dev/null | grep -m1 'relays group 1:')
        [ -n "$line" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    sleep 1
    echo "$line" >"$CCS_TMP/tr-kill-relay.txt"
    pid=$(echo "$line" | sed -n 's/.*, pid \([0-9]*\)) relays.*/\1/p')
    [ -n "$pid" ] && kill -KILL "$pid"
) &
WATCH=$!
mkdir -p "$CCS_TMP/tr-kill"
# (mpirun would end the job as soon as a process is killed, racing the
# detector, which here first needs h2's next leader to report to the root:
# with recovery on the others hang on, as in a real job, and the abort ends
# it.  CI's first run without it saw the job end before any verdict.)
export OMPI_MCA_orte_enable_recovery=1
tree_run tr-kill 60 CCSHIM_ON_DESYNC=abort ITER_MS=300 -- ok 20 2 1
unset OMPI_MCA_orte_enable_recovery
wait "$WATCH"
relay=$(sed -n 's/.*desync tree: rank \([0-9]*\) (host .*pid [0-9]*) relays group 1:.*/\1/p' "$CCS_TMP/tr-kill-relay.txt")
# (With recovery on, mpirun's exit status after MPI_Abort is not the
# abort's: the abort is checked in the log.)
tap_check "tr-kill: the relay (rank ${relay:-?}) was killed, and the abort ended the job before the timeout (exit $DSX_RC)" \
    sh -c "test -n '$relay' -a '$DSX_RC' -ne 124 && cat '$CCS_TMP/tr-kill'/log-*.txt | grep -q 'CCSHIM_ON_DESYNC=abort: aborting the job after the verdict'"
lines=$(dsx_lines tr-kill DEAD)
tap_check "tr-kill: DEAD names the relay's rank as died" sh -c \
    "test \"\$(echo '$lines' | wc -l)\" = 1 && echo '$lines' | grep -Eq '^ccshim DEAD comm=0x[0-9a-f]+ size=8 seq=[0-9]+: ranks [0-9,-]+( and [0-9]+ more)? blocked in $AR at seq [0-9]+ for N s; rank ${relay:-x} at seq [0-9]+ \\(1 behind, died\\)$'"
tap_eq "tr-kill: no MISMATCH or DESYNC" "" "$(logs tr-kill | grep -E '^ccshim (MISMATCH|DESYNC) ' || true)"
tap_check "tr-kill: the coordinator said the relay is lost and appointed another" sh -c \
    "grep -q \"desync tree: the relay of group 1 (rank $relay, host 'h2') is lost\" '$CCS_TMP/tr-kill/log-0.txt' &&
     test \"\$(grep -c 'desync tree: rank [0-9] (host .h[23].) relays group 1 ' '$CCS_TMP/tr-kill/log-0.txt')\" = 2"
tap_check "tr-kill: h3's leader went back to the coordinator and on to the new relay (or became it)" sh -c \
    "cat '$CCS_TMP/tr-kill'/log-6.txt '$CCS_TMP/tr-kill'/log-7.txt | grep -q \"the link to the relay of group 1 (rank $relay at 127.0.0.1:[0-9]*) ended; host 'h3' reports to the coordinator again\" &&
     { test \"\$(cat '$CCS_TMP/tr-kill'/log-6.txt '$CCS_TMP/tr-kill'/log-7.txt | grep -c \"host 'h3' reports through the relay of group 1\")\" = 2 ||
       cat '$CCS_TMP/tr-kill'/log-6.txt '$CCS_TMP/tr-kill'/log-7.txt | grep -q 'relays group 1:'; }"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag tr-kill

# The link between h3's leader and the relay reset by a proxy 1 s after it
# opens (the relay listens on PORT and is announced at the proxy's PPORT):
# the leader reports to the coordinator again (the relay is still there:
# it stays), and a healthy job ends normally, without a verdict.
proxy_start tr-reset 1:reset
# (Group 1's ranks only: group 0's relay listens where it likes.)
WRAP='if [ "$OMPI_COMM_WORLD_RANK" -ge 4 ]; then export CCSHIM_DESYNC_RELAY_LISTEN=127.0.0.1:$P0 CCSHIM_DESYNC_RELAY_ADDR=127.0.0.1:$P1; fi
'"$FOUR_HOSTS" tree_run tr-reset 60 CCSHIM_ON_DESYNC=abort ITER_MS=100 P0=$PORT P1=$PPORT -- ok 40 2 1
proxy_stop tr-reset
tap_eq "tr-reset: exit 0 under abort" 0 "$DSX_RC"
tap_eq "tr-reset: no MISMATCH, DESYNC or DEAD" "" "$(verdicts tr-reset)"
tap_check "tr-reset: the proxy reset the leader's link to the relay" grep -q 'reset connection 1' "$CCS_TMP/tr-reset/proxy.txt"
tap_check "tr-reset: the relay was announced at the proxy" sh -c \
    "grep -Eq 'relays group 1: its hosts. leaders report here, on 127\\.0\\.0\\.1:$PORT, announced as 127\\.0\\.0\\.1' '$CCS_TMP/tr-reset'/log-4.txt '$CCS_TMP/tr-reset'/log-5.txt"
tap_check "tr-reset: h3's leader went back to the coordinator, once" sh -c \
    "test \"\$(cat '$CCS_TMP/tr-reset'/log-6.txt '$CCS_TMP/tr-reset'/log-7.txt | grep -c \"the link to the relay of group 1 (rank [45] at 127.0.0.1:$PPORT) ended; host 'h3' reports to the coordinator again\")\" = 1"
tap_eq "tr-reset: no warning from any rank" "" "$(logs tr-reset | grep -i 'warning' || true)"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag tr-reset

# The relay's own link to the root (h2's ranks reach the coordinator
# through a proxy: CCSHIM_COORD with a port on a rank other than 0) reset
# 1 s after it opens: the root loses the relay (its fold and listed ranks
# unreachable, counted as computing), the relay reconnects at once and,
# holding the group's key, is its relay again; h3's leader stays with it.
# A healthy job ends normally, without a verdict.
proxy_start tr-uplink 1:reset
WRAP='case $OMPI_COMM_WORLD_RANK in 0) export CCSHIM_COORD=127.0.0.1:$P0 ;; 4|5) export CCSHIM_COORD=127.0.0.1:$P1 ;; esac
'"$FOUR_HOSTS" tree_run tr-uplink 60 CCSHIM_ON_DESYNC=abort ITER_MS=100 P0=$PORT P1=$PPORT -- ok 40 2 1
proxy_stop tr-uplink
tap_eq "tr-uplink: exit 0 under abort" 0 "$DSX_RC"
tap_eq "tr-uplink: no MISMATCH, DESYNC or DEAD" "" "$(verdicts tr-uplink)"
# The fault is real: the relay's leader says once that its link is down,
# and that it reconnected; no other rank warns.
tap_check "tr-uplink: the one warning is the relay's lost link, and it reconnected" sh -c \
    "test \"\$(cat '$CCS_TMP/tr-uplink'/log-*.txt | grep -i warning | sed 's/^ccshim\\[[45]@[^]]*\\]: //; s/127.0.0.1:[0-9]*/ADDR/')\" = \
'warning: desync side channel: the coordinator at ADDR closed the connection; detection across hosts is off until the coordinator answers' &&
     cat '$CCS_TMP/tr-uplink'/log-4.txt '$CCS_TMP/tr-uplink'/log-5.txt | grep -q 'reconnected to the coordinator at 127.0.0.1:$PPORT after'"
tap_check "tr-uplink: the proxy reset the relay's link to the root" grep -q 'reset connection 1' "$CCS_TMP/tr-uplink/proxy.txt"
tap_check "tr-uplink: the root lost the relay of group 1, then had it back" sh -c \
    "grep -q 'desync tree: the relay of group 1 (rank [45], host .h2.) is lost' '$CCS_TMP/tr-uplink/log-0.txt' &&
     test \"\$(grep -c 'desync tree: rank [45] (host .h2.) relays group 1 ' '$CCS_TMP/tr-uplink/log-0.txt')\" = 2"
tap_check "tr-uplink: h3's leader stayed with the relay (sent there once, never back)" sh -c \
    "test \"\$(cat '$CCS_TMP/tr-uplink'/log-6.txt '$CCS_TMP/tr-uplink'/log-7.txt | grep -c 'reports through the relay of group 1')\" = 1 &&
     ! cat '$CCS_TMP/tr-uplink'/log-6.txt '$CCS_TMP/tr-uplink'/log-7.txt | grep -q 'reports to the coordinator again'"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag tr-uplink
