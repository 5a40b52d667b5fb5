#!/bin/sh
# desync-containers.sh - ranks in containers of their own on one node
# (docs/desync.md, "Containers"), made with unshare by container-rank.sh:
#
#   pid: each rank in a PID namespace of its own, /dev/shm and the host
#        name shared (docker run --pid=private --ipc=host, one container
#        per rank): the ranks share memory, but a pid from another rank's
#        namespace names another process or none.  Liveness comes from the
#        status heartbeat there, never from kill(pid, 0).
#   ipc: also a private /dev/shm and a host name of its own (docker's
#        default): the ranks are hosts of their own to ccshim, and the
#        coordinator's TCP side channel carries them.
#
#   ipc-onehost: private /dev/shm, but one CCSHIM_DESYNC_HOST given to
#        both: nothing joins them, and each rank says so.
#
# In each: a healthy job where rank 1 computes 1.5 s while rank 0 waits
# gives no verdict under --on-desync abort (before ccshim published the
# PID namespace, "pid" gave "DEAD ... rank 1 ... died" at once and the
# abort ended the healthy job); a count mismatch is still a MISMATCH
# naming rank 1; rank 1 killed (SIGKILL) inside its container, the
# container left up, is still named: DEAD from its stopped heartbeat
# ("pid"), unreachable ("ipc").
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
[ "$CCS_MPI_HYDRA" = 0 ] || tap_skip_all "the container launch is written for Open MPI's mpirun"
unshare -p -f -m -u --mount-proc sh -c 'mount -t tmpfs tmpfs /dev/shm && hostname c0' >/dev/null 2>&1 ||
    tap_skip_all "cannot make PID, mount and UTS namespaces here (unshare needs root or user namespaces)"
CT="$top_srcdir/tests/desync/container-rank.sh"
tap_plan 18

# ct_run NAME MODE SECONDS [VAR=VALUE...] -- ARGS...: desync_scenario ARGS
# on 2 ranks, each in a container of MODE, with the files dsx_run writes
# (lib.sh); sets DSX_RC.  MPI itself goes over TCP: Open MPI's shared
# memory transport names its segments by pid, which two namespaces share.
ct_run() {
    local name=$1 mode=$2 secs=$3 d="$CCS_TMP/$1" x=""
    shift 3
    while [ "$1" != "--" ]; do x="$x -x $1"; shift; done
    shift
    mkdir -p "$d/trace"
    # shellcheck disable=SC2086
    CCS_LAUNCHER=1 ccs_run_timeout "$secs" "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe \
        --mca btl self,tcp -np 2 \
        -x CCSHIM_LOG="$d/log-%r.txt" -x CCSHIM_TRACE_DIR="$d/trace" -x CCSHIM_SUMMARY=0 \
        -x CCSHIM_JOB_ID="ct-$name" -x CCSHIM_LOG_LEVEL=info $x \
        "$CT" "$mode" "$CCSHIM_RUN" --mpi --on-desync abort -- "$SCENARIO" "$@" >"$d/out" 2>"$d/err"
    DSX_RC=$?
}

# ct_verdicts NAME: every verdict line of every rank (any class).
ct_verdicts() { cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep -E '^ccshim [A-Z]+ ' || true; }
AR='allreduce\(count=4, float32, sum\)'
MISMATCH_RE="^ccshim MISMATCH comm=0x[0-9a-f]+ size=2 seq=3: rank 0 issued $AR, rank 1 issued allreduce\(count=8, float32, sum\)$"
for mode in pid ipc; do
    # Healthy: rank 1 computes 1.5 s before its third all-reduce.  The
    # STRAGGLER warning (at 0.5 s here) shows that rank 0 saw rank 1
    # computing: the ranks watch each other (ccshim before the PID
    # namespace was published either named rank 1 dead, or, when rank 0
    # opened the segment second, took it for a crashed job's and made
    # another: no detection between them at all).
    ct_run "$mode-compute" $mode 60 CCSHIM_DESYNC_STRAGGLER_MS=500 -- compute 5 2 1
    tap_eq "$mode-compute: exit 0 under --on-desync abort" 0 "$DSX_RC"
    tap_eq "$mode-compute: no MISMATCH, DESYNC or DEAD" "" "$(ct_verdicts "$mode-compute" | grep -v '^ccshim STRAGGLER ')"
    tap_check "$mode-compute: one STRAGGLER: rank 0 saw rank 1 computing" sh -c 'test "$(echo "$1" | grep -c .)" -eq 1 && echo "$1" | grep -Eq "$2"' _ \
        "$(dsx_lines "$mode-compute" STRAGGLER | sed 's/waited [0-9.]* s/waited N s/')" \
        "^ccshim STRAGGLER comm=0x[0-9a-f]+ size=2 seq=3: rank 0 waited N s in $AR for rank 1 \\(not in any collective: computing or in point-to-point\\); a warning, not a desync$"
    [ "$TAP_FAILED" -eq 0 ] || dsx_diag "$mode-compute"
    # A count mismatch: still named, with the rank.
    ct_run "$mode-count" $mode 60 SETTLE_MS=5000 -- count 5 2 1
    dsx_check_verdict "$mode-count" MISMATCH "$MISMATCH_RE"
done
tap_eq "pid-compute: no warning (the ranks share /dev/shm)" "" "$(cat "$CCS_TMP/pid-compute"/log-*.txt | grep ': warning: ' || true)"
# Private /dev/shm but one CCSHIM_DESYNC_HOST for both: each rank believes
# the other on its host, and no memory joins them.  Never silent: each says
# once, a heartbeat period (2 s here) after its start, that the other never
# came into its shared memory and what to do.
ct_run ipc-onehost ipc 60 CCSHIM_DESYNC_HOST=node1 CCSHIM_DESYNC_HEARTBEAT_MS=2000 COMPUTE_MS=3000 -- compute 5 2 1
tap_eq "ipc-onehost: exit 0" 0 "$DSX_RC"
tap_eq "ipc-onehost: each rank says once that the other does not share its /dev/shm" "1 1" \
    "$(for r in 0 1; do grep -c "^ccshim\[$r@c$r\]: warning: desync: 1 of the 2 ranks the launcher puts on host 'node1' came into its shared memory ([0-9]* s after this one started): the others do not share /dev/shm with this rank (a container per rank with a /dev/shm of its own?), so they are not compared with it; share /dev/shm between them, or give each its own CCSHIM_DESYNC_HOST (then they talk over TCP)$" "$CCS_TMP/ipc-onehost/log-$r.txt"; done | paste -sd' ')"
# Rank 1 killed in its container, the container left up.  Shared memory
# across PID namespaces: DEAD once its heartbeat has stopped for
# CCSHIM_DESYNC_HEARTBEAT_MS (2 s here).
ct_run pid-kill pid 60 KEEP_AFTER_KILL=1 CCSHIM_DESYNC_HEARTBEAT_MS=2000 -- kill 5 2 1
dsx_check_verdict pid-kill DEAD "^ccshim DEAD comm=0x[0-9a-f]+ size=2 seq=3: rank 0 blocked in $AR at seq 3 for N s; rank 1 at seq 2 \(1 behind, died\)$"
# Rank 1 dies 0.3 s after rank 0 blocks (the scenario's kill); its status
# was last republished at most 0.5 s before (an unchanged status is
# republished twice a second), so its heartbeat has stopped for 2 s no
# earlier than 1.8 s into rank 0's block.  A pid looked up across the
# namespaces would give DEAD at the block threshold (1 s).
tap_check "pid-kill: not before the heartbeat period (the pid was not looked up): rank 0 blocked >= 1.7 s" \
    sh -c 'l=$(cat "$1"/log-*.txt | grep "^ccshim DEAD " | head -1 | sed -n "s/.* for \([0-9]*\.[0-9]\) s;.*/\1/p"); awk -v l="${l:-0}" "BEGIN { exit !(l >= 1.7) }"' _ "$CCS_TMP/pid-kill"
# Hosts of their own: the coordinator names it unreachable once its
# leader's link has been lost for the heartbeat period.
ct_run ipc-kill ipc 60 KEEP_AFTER_KILL=1 CCSHIM_DESYNC_HEARTBEAT_MS=2000 -- kill 5 2 1
dsx_check_verdict ipc-kill DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=2 seq=3: rank 0 blocked in $AR at seq 3 for N s; rank 1 unreachable \(host 'c1': no word from its leader for N s; last seen at seq 2; not known to be dead\)$"
tap_done
