#!/bin/sh
# desync-twohost.sh - desync detection on two hosts for real: two network
# namespaces joined by a veth pair, each with its own host name (netns.sh),
# so the coordinator, the host leaders, shared memory per host and TCP
# between the hosts run as on two machines.  Ranks 0-1 run on hA, 2-3 on hB.
#
#   - MPI: mpirun in hA starts its daemon on hB through a launch agent of
#     the test's own (plm_rsh_agent); the ranks talk over TCP on the veth.
#   - NCCL as torchrun starts it (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
#     LOCAL_RANK, MASTER_ADDR, MASTER_PORT, one CCSHIM_SECRET): 4 ranks of
#     ccshim-trainer-nccl --device host on the test NCCL.
#
# Each scenario's verdict must have the right class, ranks and seq, be seen
# on both hosts, and come within the targets (MISMATCH 1 s after the odd
# call, DESYNC 2 s after the last rank blocked; docs/performance.md).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
. "$top_srcdir/tests/desync/netns.sh"
th_setup || tap_skip_all "$TH_WHY"
T="$top_builddir/ccshim-trainer-nccl"
have_nccl=1
{ [ -x "$T" ] && [ -f "$top_builddir/tests/nccl/libnccl.so.2" ]; } || have_nccl=0
have_mpi=1
{ ccs_have_mpi && [ -x "$SCENARIO" ]; } || have_mpi=0
[ $have_nccl = 1 ] || [ $have_mpi = 1 ] || tap_skip_all "neither MPI nor the test NCCL trainer is built"
tap_plan 66

# Bounds that hold on 2 shared cores (a verdict while the job runs, not at
# its end); the latency targets are make check-timing's and make bench's,
# and the "# figure:" lines give what each case took.  A mismatched call
# completes, so the ranks wait MISMATCH_MS before MPI_Finalize: the abort
# ends the job at the verdict, and a late detector still judges in time.
SETTLE=600
MISMATCH_MS=5000
LATE=10000
AR='allreduce\(count=4, float32, sum\)'

# th_mpi NAME SECONDS [VAR=VALUE...] -- ARGS...: desync_scenario ARGS on 4
# MPI ranks, 2 per host, with the files dsx_run writes (lib.sh); sets DSX_RC.
th_mpi() {
    local name=$1 secs=$2 d="$CCS_TMP/$1" x=""
    shift 2
    while [ "$1" != "--" ]; do x="$x -x $1"; shift; done
    shift
    mkdir -p "$d/trace"
    # shellcheck disable=SC2086
    # shellcheck disable=SC2086
    ccs_run_timeout "$secs" "$TH_EXEC" hA "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe ${TH_MPI_OPTS:-} \
        --host hA:2,hB:2 -np 4 --mca plm_rsh_agent "$TH_EXEC --rsh" \
        --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none \
        --mca btl_tcp_if_include "$TH_NET" --mca oob_tcp_if_include "$TH_NET" \
        -x CCSHIM_LOG="$d/log-%r.txt" -x CCSHIM_TRACE_DIR="$d/trace" -x CCSHIM_SUMMARY=0 \
        -x CCSHIM_JOB_ID="th-$name" -x CCSHIM_LOG_LEVEL=info $x \
        "$CCSHIM_RUN" --mpi -- "$SCENARIO" "$@" >"$d/out" 2>"$d/err"
    DSX_RC=$?
}

# th_seen_both NAME CLASS: one TAP point: exactly one line of the verdict
# on each host (hA: ranks 0-1, hB: ranks 2-3; one rank a host logs it, the
# one its host's claim names) and one full report per verdict in the job.
th_seen_both() {
    tap_eq "$1: one line on each host, one full report" "1 1 one-report-per-verdict" \
        "$(dsx_per_host "$1" "$2" "0 1" "2 3")"
}

# mpi_case NAME SCENARIO CULPRIT CLASS REGEX MAX_MS: three TAP points for the
# verdict and one for the latency.
mpi_case() {
    local name=$1 sc=$2 culprit=$3 cls=$4 re=$5 max=$6 lat
    local settle=$SETTLE
    [ "$cls" = MISMATCH ] && settle=$MISMATCH_MS
    th_mpi "$name" 40 CCSHIM_ON_DESYNC=abort SETTLE_MS=$settle -- "$sc" 5 2 "$culprit"
    dsx_check_verdict "$name" "$cls" "$re"
    th_seen_both "$name" "$cls"
    lat=$(dsx_latency_ms "$name" "$cls")
    tap_check "$name: reported $lat ms after the odd call (<= $max)" test "$lat" -le "$max"
    echo "# figure: mpi $name $cls $lat ms"
}

if [ $have_mpi = 1 ]; then
    # The culprit on the coordinator's host (1) or on the other one (2).
    mpi_case m-count count 1 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued allreduce\(count=8, float32, sum\) where ranks 0,2-3 issued $AR$" $MISMATCH_MS
    mpi_case m-skip skip 2 DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=5: ranks 0-1,3 blocked in $AR at seq 5 for N s; rank 2 at seq 4 \(1 behind, in MPI_Finalize\)$" $((SETTLE + LATE))
    mpi_case m-op op 2 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 2 issued allreduce\(count=4, float32, max\) where ranks 0-1,3 issued $AR$" $MISMATCH_MS
    mpi_case m-dtype dtype 3 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 3 issued allreduce\(count=4, int32, sum\) where ranks 0-2 issued $AR$" $MISMATCH_MS
    mpi_case m-root root 2 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 2 issued bcast\(count=4, float32, root=1\) where ranks 0-1,3 issued bcast\(count=4, float32, root=0\)$" $MISMATCH_MS
    mpi_case m-kind kind 1 MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued bcast\(count=4, float32, root=0\) where ranks 0,2-3 issued $AR$" $MISMATCH_MS
    mpi_case m-extra extra 2 DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=6: rank 2 blocked in $AR at seq 6 for N s; rank 0 at seq 5 \(1 behind, (in MPI_Finalize|exited)\); rank 1 at seq 5 \(1 behind, (in MPI_Finalize|exited)\); rank 3 at seq 5 \(1 behind, (in MPI_Finalize|exited)\)$" $((SETTLE + LATE))
    mpi_case m-exit exit 3 DESYNC "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=3: ranks 0-2 blocked in $AR at seq 3 for N s; rank 3 at seq 2 \(1 behind, exited\)$" $LATE
    # 12 communicators, more than a status holds: both hosts' ranks take the
    # same turns (from the wall clock) and keep the one the coordinator's
    # search narrows in view; the odd call on hB, at seq 41 of 80 of the
    # last communicator made.  (Small: 4 ranks on 2 cores make about 130
    # all-reduces a second over TCP here; seq 501 of 2000 came 45 s in.)
    th_mpi m-many 60 CCSHIM_ON_DESYNC=abort SETTLE_MS=$MISMATCH_MS COMMS=12 -- op 80 40 2
    dsx_check_verdict m-many MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=41: rank 2 issued allreduce\(count=4, float32, max\) where ranks 0-1,3 issued $AR$"
    th_seen_both m-many MISMATCH
    lat=$(dsx_latency_ms m-many MISMATCH)
    echo "# figure: mpi m-many MISMATCH $lat ms"
    # Rank 3 (hB, not its host's leader) dies of SIGKILL: its leader tells
    # the coordinator at once.  (mpirun would end the job as soon as a
    # process is killed, racing the detector: --enable-recovery lets the
    # others hang on, as they would in a real job; the abort then ends it.)
    TH_MPI_OPTS="--enable-recovery" th_mpi m-kill 40 CCSHIM_ON_DESYNC=abort -- kill 5 2 3
    tap_check "m-kill: the job ended before the timeout (exit $DSX_RC)" test "$DSX_RC" -ne 124
    tap_check "m-kill: DEAD names rank 3 at the right seq" sh -c 'test "$(echo "$1" | grep -c .)" -eq 1 && echo "$1" | grep -Eq "^ccshim DEAD comm=0x[0-9a-f]+ size=4 seq=3: ranks 0-2 blocked in $2 at seq 3 for N s; rank 3 at seq 2 \(1 behind, died\)$"' _ "$(dsx_lines m-kill DEAD)" "$AR"
    th_seen_both m-kill DEAD
    lat=$(dsx_latency_ms m-kill DEAD)
    tap_check "m-kill: reported $lat ms after the rank died (<= $LATE)" test "$lat" -le $LATE
    echo "# figure: mpi m-kill DEAD $lat ms"
    # A real deadlock, the culprit on hB: reported after the block threshold.
    th_mpi m-deadlock 40 CCSHIM_ON_DESYNC=abort -- deadlock 5 2 2
    lines=$(dsx_lines m-deadlock DESYNC)
    tap_check "m-deadlock: DESYNC on the world names rank 2 blocked in the barrier elsewhere" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=4: ranks 0-1,3 blocked in $2 at seq 4 for N s; rank 2 at seq 3 \(1 behind, blocked in barrier on comm=0x[0-9a-f]+ seq 1\)$"' _ "$lines" "$AR"
    th_seen_both m-deadlock DESYNC
    lat=$(dsx_latency_ms m-deadlock DESYNC)
    tap_check "m-deadlock: reported $lat ms after the last rank blocked (<= $LATE)" test "$lat" -le $LATE
    echo "# figure: mpi m-deadlock DESYNC $lat ms"
    # Healthy with skew: one rank on either host computes 1.2-2.5 s per
    # iteration while the others wait; STRAGGLER warnings at most.  The
    # thresholds are scaled down with the run: blocked 1 s (the default) and
    # a heartbeat of 2.5 s (default 10 s), so these 9 s with skews above
    # both show what a 60 s run with 10-25 s skews would at the defaults
    # (waits past the block threshold, silences past the heartbeat, across
    # hosts) in a sixth of the make check time.
    th_mpi m-healthy 60 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_STRAGGLER_MS=2000 CCSHIM_DESYNC_HEARTBEAT_MS=2500 -- healthy 5
    tap_eq "m-healthy: exit 0 (nothing aborted it)" 0 "$DSX_RC"
    tap_eq "m-healthy: no MISMATCH, DESYNC or DEAD, no dropped connection" "" \
        "$(cat "$CCS_TMP/m-healthy"/log-*.txt 2>/dev/null | grep -E '^ccshim (MISMATCH|DESYNC|DEAD) |warning: .*closed the connection' || true)"
    tap_check "m-healthy: the coordinator listened on hA's veth address" \
        grep -q "coordinator at $TH_ADDR_A:" "$CCS_TMP/m-healthy/log-0.txt" "$CCS_TMP/m-healthy/log-1.txt"
else
    for i in $(seq 45); do tap_skip "MPI scenario" "MPI or desync_scenario not available"; done
fi

# ---------------------------------------------------------------- NCCL, torchrun-style
# th_nccl NAME SECONDS [VAR=VALUE...] -- TRAINER ARGS...: the 4 ranks, each
# started on its host as torchrun would; per-rank logs as above.
th_nccl() {
    local name=$1 secs=$2 d="$CCS_TMP/$1" envs="" r h pids="" p
    shift 2
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    mkdir -p "$d"
    NCCL_TIMEOUTS=0
    for r in 0 1 2 3; do
        h=hA
        [ $r -ge 2 ] && h=hB
        # shellcheck disable=SC2086
        RANK=$r LOCAL_RANK=$((r % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=$TH_ADDR_A MASTER_PORT=29500 \
            CCSHIM_SECRET=twohost-$$-0123456789abcdef0123456789 CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_LOG_LEVEL=info \
            LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            ccs_run_timeout "$secs" env $envs "$TH_EXEC" $h "$CCSHIM_RUN" --no-mpi -- "$T" --device host \
            --nccl-id-file "$d/id" "$@" >"$d/out-$r" 2>&1 &
        pids="$pids $!"
    done
    DSX_RC=0
    for p in $pids; do
        wait "$p"
        r=$?
        [ $r -eq 124 ] && NCCL_TIMEOUTS=$((NCCL_TIMEOUTS + 1))
        [ $r -ne 0 ] && DSX_RC=$r
    done
}

# th_first_ms NAME CLASS: the earliest report time (CLOCK_MONOTONIC ms) of CLASS.
th_first_ms() {
    cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep "^ccshim $2 " | sed -n 's/.* at=\([0-9.]*\)\]$/\1/p' | sort -n | head -1
}

# th_count_verdict NAME: the NCCL job NAME, rank 1's count one short once,
# gave one MISMATCH naming rank 1 and both counts at the exact seq, seen on
# both hosts, within MISMATCH_MS of the odd call (three checks).
th_count_verdict() {
    local lines t0 t1 lat failed_before=$TAP_FAILED
    lines=$(dsx_lines "$1" MISMATCH)
    tap_check "$1: MISMATCH naming rank 1 and both counts at the exact seq" sh -c 'test "$(echo "$1" | grep -c .)" -eq 1 && echo "$1" | grep -Eq "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 1 issued allreduce\(count=3151, float64, sum\) where ranks 0,2-3 issued allreduce\(count=3152, float64, sum\)$"' _ "$lines"
    [ "$TAP_FAILED" -eq "$failed_before" ] || { echo "$lines" | tap_diag; dsx_diag "$1"; }
    th_seen_both "$1" MISMATCH
    t0=$(sed -n 's/^culprit_call_ms=//p' "$CCS_TMP/$1/out-1" | head -1)
    t1=$(th_first_ms "$1" MISMATCH)
    lat=$(awk -v a="${t0:-0}" -v b="${t1:-999999999}" 'BEGIN { printf "%d\n", (a > 0 ? b - a : 999999) }')
    tap_check "$1: reported $lat ms after rank 1's call (<= $MISMATCH_MS)" test "$lat" -le $MISMATCH_MS
    echo "# figure: nccl $1 MISMATCH $lat ms"
}

if [ $have_nccl = 1 ]; then
    # Rank 1 (hA) reduces one element less, once, in step 3; the job runs on
    # (the test NCCL lets a count mismatch complete), so the verdict must
    # come from records, not from a hang, and while the job runs: 1000
    # steps, about 2 s, several times the search's 0.2-0.4 s (n-last below
    # has it at the job's end).
    # The secret from a file in a directory both hosts share.
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$CCS_TMP/job.secret"
    chmod 600 "$CCS_TMP/job.secret"
    th_nccl n-count 60 -u CCSHIM_SECRET CCSHIM_SECRET_FILE="$CCS_TMP/job.secret" -- --inject=wrong-count:1:3 --steps 1000
    tap_eq "n-count: no rank hung" 0 "$NCCL_TIMEOUTS"
    th_count_verdict n-count
    tap_eq "n-count: no dropped connection" "" "$(cat "$CCS_TMP/n-count"/log-*.txt | grep 'warning: .*closed the connection' || true)"
    # The same in the job's last step (38 of 40, about 0.1 s in all): the
    # ranks end ms later and linger until the coordinator's BYE, which
    # waits for the search (docs/desync.md, "The end of a job").  Before,
    # the ranks were gone before the search narrowed: never reported.
    th_nccl n-last 60 -- --inject=wrong-count:1:38 --steps 40
    tap_eq "n-last: exit 0, no rank hung" "0 0" "$DSX_RC $NCCL_TIMEOUTS"
    th_count_verdict n-last
    tap_eq "n-last: every rank had the coordinator's BYE" "" "$(grep -h 'no BYE from the coordinator' "$CCS_TMP/n-last"/log-*.txt || true)"
    # Healthy: nothing to report, every connection kept to the end.  (A rank
    # that is itself exiting notes a link that ends at INFO: the
    # coordinator's rank may have gone first at the job's normal end.)
    th_nccl n-healthy 60 CCSHIM_DESYNC_STRAGGLER_MS=60000 -- --steps 40
    tap_eq "n-healthy: exit 0" 0 "$DSX_RC"
    tap_eq "n-healthy: no verdict at all, no dropped connection" "" \
        "$(cat "$CCS_TMP/n-healthy"/log-*.txt 2>/dev/null | grep -E '^ccshim [A-Z]+ |warning: .*(closed the connection|handshake)' || true)"
    tap_check "n-healthy: the coordinator listened on MASTER_ADDR at a port keyed by the secret (not MASTER_PORT + 1)" \
        sh -c "grep -q 'coordinator at $TH_ADDR_A (a port keyed by the secret)' '$CCS_TMP/n-healthy/log-0.txt' '$CCS_TMP/n-healthy/log-1.txt' && ! grep -q '29501' '$CCS_TMP/n-healthy'/log-*.txt"
    tap_eq "n-healthy: every rank had the coordinator's BYE" "" "$(grep -h 'no BYE from the coordinator' "$CCS_TMP/n-healthy"/log-*.txt || true)"
    # Rank 2 (hB) skips a mini-batch in step 3: the others block in the
    # next all-reduce; rank 2 is one behind for good.
    th_nccl n-skip 60 CCSHIM_ON_DESYNC=abort -- --sync=per-minibatch --inject=skip-minibatch:2:3 --steps 5
    tap_eq "n-skip: no rank left hanging until the timeout" 0 "$NCCL_TIMEOUTS"
    tap_check "n-skip: DESYNC naming rank 2 and step 3" sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 2 issued seq [0-9]+ \(allreduce\(count=[0-9]+, float64, sum\)\) in step 4 where ranks 0-1,3 issued it in step 3: rank 2 issued fewer collectives than the others in step 3 and is behind from there on$"' _ "$(dsx_lines n-skip DESYNC)"
    th_seen_both n-skip DESYNC
    # No secret: unauthenticated TCP is refused in one line per rank; the
    # job runs on with detection within each host.
    th_nccl n-nosecret 60 -u CCSHIM_SECRET CCSHIM_LOG_LEVEL=debug -- --steps 3
    tap_eq "n-nosecret: exit 0" 0 "$DSX_RC"
    tap_eq "n-nosecret: every rank says once that TCP is refused" "1 1 1 1" \
        "$(for r in 0 1 2 3; do grep -c 'neither CCSHIM_SECRET nor CCSHIM_SECRET_FILE is set; unauthenticated TCP refused, detection across hosts is off (within each host it stays on)' "$CCS_TMP/n-nosecret/log-$r.txt"; done | tr '\n' ' ' | sed 's/ $//')"
    tap_check "n-nosecret: shared memory on, no coordinator" sh -c '! grep -q "coordinator at" "$1"/log-*.txt && grep -q "host .hB., shared memory," "$1/log-2.txt"' _ "$CCS_TMP/n-nosecret"
    # A secret file others may read is refused, naming the file.
    chmod 644 "$CCS_TMP/job.secret"
    th_nccl n-badfile 60 -u CCSHIM_SECRET CCSHIM_SECRET_FILE="$CCS_TMP/job.secret" -- --steps 3
    tap_check "n-badfile: the file and its mode are named" grep -q "CCSHIM_SECRET_FILE='$CCS_TMP/job.secret' must be yours and private (mode 0600), is uid 0 mode 0644; TCP between hosts refused" "$CCS_TMP/n-badfile/log-0.txt"
else
    for i in $(seq 21); do tap_skip "NCCL scenario" "ccshim-trainer-nccl or the test NCCL not built"; done
fi
[ "$TAP_FAILED" -eq 0 ] || for n in n-count n-last n-healthy n-skip n-nosecret n-badfile; do
    [ -d "$CCS_TMP/$n" ] && { echo "--- $n"; head -30 "$CCS_TMP/$n"/log-*.txt "$CCS_TMP/$n"/out-*; } | tap_diag
done
tap_done
