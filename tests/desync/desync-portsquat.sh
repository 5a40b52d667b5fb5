#!/bin/sh
# desync-portsquat.sh - another local user takes the coordinator's port
# first (issue 45).  A torchrun-style job (RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, a secret from
# ccshim-run --new-secret) of 4 ranks of ccshim-trainer-nccl on the test
# NCCL, on two host identities (CCSHIM_DESYNC_HOST hA, hB): rank 2 skips a
# mini-batch in step 3, the others block, and only the coordinator, which
# sees both hosts, can name it.
#
#   - squat: an unprivileged user listens on MASTER_PORT + 1 first, where the
#     coordinator listened before: it turned detection across hosts off ("cannot
#     start the coordinator ... detection across hosts is off", the job hung)
#     and collected the leaders' tickets.  Now the port is keyed by the
#     secret: the DESYNC is named on both hosts, nothing reaches the squatter.
#   - retry: the port given by CCSHIM_COORD is held by that user for 3 s:
#     rank 0 says so (a warning), tries again every 2 s, says when it
#     listens, and the DESYNC is still named on both hosts.
# Needs root (it creates the unprivileged user it attacks with).
. "$top_srcdir/tests/tap.sh"
T="$top_builddir/ccshim-trainer-nccl"
{ [ -x "$T" ] && [ -f "$top_builddir/tests/nccl/libnccl.so.2" ]; } || tap_skip_all "ccshim-trainer-nccl or the test NCCL not built"
[ "$(id -u)" = 0 ] || tap_skip_all "needs root, to create the attacking user"
command -v runuser > /dev/null 2>&1 || tap_skip_all "runuser not installed (util-linux)"
command -v python3 > /dev/null 2>&1 || tap_skip_all "python3 not installed (the squatter)"
ATT=ccshim-attacker
id "$ATT" > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ATT" ||
    tap_skip_all "cannot create the user $ATT"
tap_plan 9

chmod 711 "$CCS_TMP"
(umask 077; "$CCSHIM_RUN" --new-secret > "$CCS_TMP/job.secret")
PORT=$(ccs_ports 3) # MASTER_PORT, MASTER_PORT + 1 (squatted), an explicit coordinator port

# squat PORT SECONDS NAME [ACCEPT]: as the unprivileged user, listens on
# 127.0.0.1:PORT for SECONDS; with ACCEPT 1 (the default) accepts every
# connection and writes each connection and each read of bytes as a line
# of $CCS_TMP/NAME.squat, at once.  (An accepted connection the squatter
# closes first holds the port for a minute in TIME_WAIT: the retry case
# only listens.)
squat() {
    runuser -u "$ATT" -- python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
s.settimeout(0.05)
end, conns = time.time() + float(sys.argv[2]), []
print("listening", flush=True)
while time.time() < end:
    try:
        if sys.argv[3] != "1":
            time.sleep(0.05)
            continue
        c, _ = s.accept()
        print("connection", flush=True)
        c.settimeout(0.05)
        conns.append(c)
    except OSError:
        pass
    for c in conns:
        try:
            n = len(c.recv(65536))
            if n:
                print("bytes %d" % n, flush=True)
        except OSError:
            pass
' "$1" "$2" "${4:-1}" > "$CCS_TMP/$3.squat" 2>&1 &
    SQUAT_PID=$!
    i=0
    while ! grep -q listening "$CCS_TMP/$3.squat" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}

# job NAME [VAR=VALUE...]: the 4 ranks, each started as torchrun would, the
# skipped mini-batch under CCSHIM_ON_DESYNC=abort; sets RCS (the exit statuses).
job() {
    local name=$1 d="$CCS_TMP/$1" r pids="" p
    shift
    mkdir -p "$d"
    for r in 0 1 2 3; do
        # shellcheck disable=SC2086
        RANK=$r LOCAL_RANK=$((r % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
            CCSHIM_DESYNC_HOST=h$((r / 2)) CCSHIM_SECRET_FILE="$CCS_TMP/job.secret" CCSHIM_ON_DESYNC=abort \
            CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_LOG_LEVEL=info \
            LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            ccs_run_timeout 60 env "$@" "$CCSHIM_RUN" --no-mpi -- "$T" --device host --nccl-id-file "$d/id" \
            --sync=per-minibatch --inject=skip-minibatch:2:3 --steps 5 > "$d/out-$r" 2>&1 &
        pids="$pids $!"
    done
    RCS=""
    for p in $pids; do
        wait "$p"
        RCS="$RCS $?"
    done
}

DESYNC_RE='^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 2 issued seq [0-9]+ .* in step 4 where ranks 0-1,3 issued it in step 3'
# seen_both NAME: the DESYNC naming rank 2 is in a log of each host.
seen_both() {
    grep -Eqs "$DESYNC_RE" "$CCS_TMP/$1/log-0.txt" "$CCS_TMP/$1/log-1.txt" &&
        grep -Eqs "$DESYNC_RE" "$CCS_TMP/$1/log-2.txt" "$CCS_TMP/$1/log-3.txt"
}

# --- squat: MASTER_PORT + 1 held by another user for the whole job.
squat $((PORT + 1)) 40 squat
job squat
tap_check "squat: no rank hung until the timeout (exit statuses:$RCS)" sh -c "! echo '$RCS' | grep -qw 124"
tap_check "squat: the DESYNC naming rank 2 in step 3 is reported on both hosts" seen_both squat
tap_eq "squat: no line says the coordinator could not start or detection is off" "" \
    "$(cat "$CCS_TMP/squat"/log-*.txt | grep -E 'cannot start the coordinator|detection across hosts is off' || true)"
tap_eq "squat: both leaders found the coordinator at a port keyed by the secret" 2 \
    "$(cat "$CCS_TMP/squat"/log-*.txt | grep -c "host leader, coordinator at 127.0.0.1 (a port keyed by the secret)")"
kill "$SQUAT_PID" 2>/dev/null
wait "$SQUAT_PID" 2>/dev/null
tap_eq "squat: nothing reached the squatter (no connection, no ticket)" "1 0" \
    "$(grep -c '^listening$' "$CCS_TMP/squat.squat") $(grep -cE '^(connection|bytes)' "$CCS_TMP/squat.squat")"

# --- retry: CCSHIM_COORD's port held for 3 s.
CP=$((PORT + 2))
squat $CP 3 retry 0
job retry CCSHIM_COORD=127.0.0.1:$CP
wait "$SQUAT_PID" 2>/dev/null
tap_check "retry: no rank hung until the timeout (exit statuses:$RCS)" sh -c "! echo '$RCS' | grep -qw 124"
tap_eq "retry: rank 0 says once that it cannot listen, and that it tries again" 1 \
    "$(grep -c "warning: desync: cannot start the coordinator on 127.0.0.1 (port $CP): cannot listen on 127.0.0.1:$CP: Address already in use; trying again every 2 s (detection across hosts waits for it; within each host it is on)" "$CCS_TMP/retry/log-0.txt")"
tap_check "retry: ... then that it listens" \
    grep -Eq "warning: desync: the coordinator listens on 127.0.0.1:$CP after [0-9.]+ s \([0-9]+ attempts\); detection across hosts is on" "$CCS_TMP/retry/log-0.txt"
tap_check "retry: the DESYNC is reported on both hosts" seen_both retry
tap_done
