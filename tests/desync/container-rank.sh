#!/bin/sh
# container-rank.sh MODE CMD... - runs CMD as a rank in a "container" of
# its own (desync-containers.sh): MODE pid: a PID namespace of its own
# (unshare -p -f --mount-proc), /dev/shm and the host name shared; MODE
# ipc: also a mount and UTS namespace, a private /dev/shm (a tmpfs of its
# own, as docker --ipc=private gives) and the host name c<rank>.  CMD is a
# child of the namespace's first process (this script, as a container's
# init would be).  Rank 0's CMD has pid 2; every other rank's container
# has a side process (a sleeper) at pid 2 and its CMD at pid 100 R + 1.
# So rank 0's pid names a live process in the other containers, and rank
# R's pid none in rank 0's (whose threads take the pids after 2, and a
# thread's id answers kill(2) as a process's would).  (The kernel ends the
# sleeper with the namespace's first process.)
# KEEP_AFTER_KILL=1: a CMD killed by SIGKILL leaves its container up (the
# launcher does not see the death; only ccshim can).
mode=$1
shift
r=${OMPI_COMM_WORLD_RANK:-${RANK:-0}}
if [ "${CCS_IN_CONTAINER:-}" != 1 ]; then
    case $mode in
    pid) exec env CCS_IN_CONTAINER=1 unshare -p -f --mount-proc "$0" "$mode" "$@" ;;
    ipc) exec env CCS_IN_CONTAINER=1 unshare -p -f -m -u --mount-proc "$0" "$mode" "$@" ;;
    *) echo "container-rank.sh: unknown mode '$mode' (expected pid or ipc)" >&2; exit 2 ;;
    esac
fi
if [ "$mode" = ipc ]; then
    mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1
    hostname "c$r" || exit 1
fi
if [ "$r" -gt 0 ]; then
    sleep 300 &
    # The next pid: 100 R + 1 (ns_last_pid is this PID namespace's own).
    echo $((100 * r)) >/proc/sys/kernel/ns_last_pid 2>/dev/null ||
        { i=2; while [ $i -lt $((100 * r)) ]; do /bin/true; i=$((i + 1)); done; }
fi
"$@"
rc=$?
if [ $rc -eq 137 ] && [ "${KEEP_AFTER_KILL:-0}" = 1 ]; then sleep 60; fi
exit $rc
