#!/bin/sh
# desync-admission.sh - fair admission under a flood (docs/desync.md,
# "Security"): a 2-rank MPI job, each rank its own host identity, rank 1's
# leader reaching the coordinator through a proxy (faultproxy.py) that cuts
# the connection 6 s in, while 600 idle connections are kept open against
# the coordinator's port (each one it closes opened again at once, so its
# backlog stays full).  The leader shows its ticket and gets back within
# 5 s; rank 1's real MISMATCH about 12 s in is reported on both hosts and
# ends the job; the coordinator summarises the refused peers in a few lines.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
command -v python3 >/dev/null || tap_skip_all "python3 not installed"
command -v ss >/dev/null || tap_skip_all "ss (iproute2) not installed"
[ "$(ulimit -n)" -ge 700 ] 2>/dev/null || ulimit -n 1024 2>/dev/null || tap_skip_all "fewer than 700 descriptors"
tap_plan 7

PORT=$(ccs_ports 2)
PPORT=$((PORT + 1))
VIA='if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then c=$P0; else c=$P1; fi; CCSHIM_DESYNC_HOST=h$OMPI_COMM_WORLD_RANK CCSHIM_COORD=127.0.0.1:$c exec "$@"'
D="$CCS_TMP/admission"
mkdir -p "$D"
python3 "$top_srcdir/tests/desync/faultproxy.py" "$PPORT" "$PORT" 6:reset >"$D/proxy.txt" 2>&1 &
proxy=$!
(
    dsx_run admission 60 2 CCSHIM_ON_DESYNC=abort CCSHIM_DESYNC_TRANSPORT=tcp P0=$PORT P1=$PPORT ITER_MS=500 \
        CCSHIM_LOG_LEVEL=info -- sh -c "$VIA" _ "$SCENARIO" op 40 24 1
    echo "$DSX_RC" >"$D.rc"
) &
job=$!
ccs_wait_listen "$PORT" 20 || true
python3 "$top_srcdir/tests/desync/flood.py" "$PORT" 600 0 25 keep >"$D/flood.txt" 2>&1 &
flood=$!
# The coordinator's thread (named ccs-coord in rank 0): its nice value, and
# its CPU (utime + stime, in clock ticks) sampled every 0.5 s under the flood.
pid=$(ss -ltnp "sport = :$PORT" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
(
    t0=$(date +%s.%N); c0=""
    while [ -n "$pid" ] && [ -d "/proc/$pid" ]; do
        for t in /proc/$pid/task/*; do
            [ "$(cat "$t/comm" 2>/dev/null)" = ccs-coord ] || continue
            set -- $(sed 's/^.*) //' "$t/stat" 2>/dev/null)
            [ -n "$c0" ] || c0=$(( ${12} + ${13} ))
            echo "nice=${17} ticks=$(( ${12} + ${13} - c0 )) secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >"$D/coord.txt"
        done
        sleep 0.5
    done
) &
sampler=$!
wait "$job"
wait "$sampler" 2>/dev/null
kill "$flood" "$proxy" 2>/dev/null
wait "$flood" "$proxy" 2>/dev/null
DSX_RC=$(cat "$D.rc" 2>/dev/null || echo none)
{ cat "$D/proxy.txt"; grep -h "reconnected\|refused" "$D"/log-*.txt; } | tap_diag
tap_check "the proxy cut the leader's connection mid-run" grep -q "reset connection 1" "$D/proxy.txt"
back=$(sed -n 's/.*desync side channel: reconnected to the coordinator at 127.0.0.1:'"$PPORT"' after \([0-9.]*\) s$/\1/p' "$D/log-1.txt" | head -1)
tap_check "the leader got back within 5 s under the flood (${back:-never} s)" \
    awk -v b="${back:-99}" 'BEGIN { exit !(b <= 5.0) }'
dsx_check_verdict admission MISMATCH \
    "^ccshim MISMATCH comm=0x[0-9a-f]+ size=2 seq=25: rank 0 issued allreduce\(count=4, float32, sum\), rank 1 issued allreduce\(count=4, float32, max\)$"
tap_check "the MISMATCH was seen on both hosts" sh -c \
    "grep -q '^ccshim MISMATCH ' '$D/log-0.txt' && grep -q '^ccshim MISMATCH ' '$D/log-1.txt'"
lines=$(grep -c "desync coordinator: refused" "$D/log-0.txt")
tap_check "refused peers summarised: $lines lines, each naming how many had no member's ticket" sh -c \
    "[ $lines -ge 1 ] && [ $lines -le 8 ] && grep -Eq 'desync coordinator: refused [0-9]+ peers in the last [0-9]+ s \([0-9]+ without a member.s ticket' '$D/log-0.txt'"
read -r nice ticks secs <"$D/coord.txt" 2>/dev/null
nice=${nice#nice=}; ticks=${ticks#ticks=}; secs=${secs#secs=}
hz=$(getconf CLK_TCK)
echo "# figure: the coordinator's thread under the flood: nice ${nice:-?}, $(awk -v t="${ticks:-0}" -v s="${secs:-1}" -v h="$hz" 'BEGIN { printf "%.0f%% of a core over %.1f s", 100 * t / h / s, s }')" | tap_diag
tap_eq "the coordinator's thread (ccs-coord) runs at nice 10" 10 "${nice:-none}"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag admission
tap_done
