#!/bin/sh
# bench/desync-bench.sh - what desync detection costs and how fast it is.
#  1. per call: a tight loop of 8-byte MPI_Allreduce on 2 ranks under the
#     shim, CCSHIM_DESYNC=0 and =1 alternated (ABAB...), medians;
#  2. the background thread's CPU (its own clock) with calls flowing, with
#     ranks computing, and with 12 communicators taking turns;
#  3. detection latency on one host (shared memory) and on two host
#     identities over TCP (loopback), REPS runs each, median and max;
#  4. the scale simulation (tests/desync/desync_sim): real coordinator and
#     clients, 1k, 4k, 16k, 64k and 131k simulated ranks (SIM_SIZES), each
#     with one coordinator for every host and with the tree's relays.
# Writes the figures into docs/performance.md between its markers.
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
ITERS=${ITERS:-200000}
TRIALS=${TRIALS:-5}
REPS=${REPS:-5}
SIM_SECONDS=${SIM_SECONDS:-6}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run="$top_builddir/ccshim-run"
sc="$top_builddir/tests/desync/desync_scenario"
mpirun_() { np=$1; shift; timeout 60 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,vader \
    --mca btl_vader_single_copy_mechanism none -np "$np" "$@"; }
maxof() { sort -n | tail -1; }

# 1. per call
loop="$top_builddir/bench/mpi_loop"
: > "$tmp/off"; : > "$tmp/on"
for t in $(seq "$TRIALS"); do
    mpirun_ 2 env CCSHIM_DESYNC=0 "$run" --mpi --summary 0 -- "$loop" "$ITERS" | awk '/ns_per_call/ {print $2}' >> "$tmp/off"
    mpirun_ 2 env CCSHIM_DESYNC=1 "$run" --mpi --summary 0 -- "$loop" "$ITERS" | awk '/ns_per_call/ {print $2}' >> "$tmp/on"
done
off=$(bench_median < "$tmp/off"); on=$(bench_median < "$tmp/on")
echo "MPI_Allreduce 8 B, 2 ranks: $off ns/call detection off, $on ns/call on"

# 2. background thread CPU
cpu_of() { grep -h "background thread used" "$@" | sed 's/.*(\([0-9.]*\)% of a core).*/\1/' | sort -n | tail -1; }
mpirun_ 2 env CCSHIM_LOG_LEVEL=info CCSHIM_LOG="$tmp/busy-%r.log" "$run" --mpi --summary 0 -- "$loop" 2000000 >/dev/null
busy=$(cpu_of "$tmp"/busy-*.log)
mpirun_ 3 env CCSHIM_LOG_LEVEL=info CCSHIM_LOG="$tmp/idle-%r.log" "$run" --mpi --summary 0 -- "$sc" healthy 3 >/dev/null
idle=$(cpu_of "$tmp"/idle-*.log)
# more communicators than a status holds: they take turns (docs/desync.md, "Which 8")
mpirun_ 3 env CCSHIM_LOG_LEVEL=info CCSHIM_LOG="$tmp/many-%r.log" COMMS=12 "$run" --mpi --summary 0 -- "$sc" ok 200000 >/dev/null
many=$(cpu_of "$tmp"/many-*.log)
echo "background thread: $busy% of a core with calls flowing, $idle% with ranks computing, $many% with 12 communicators"

# 3. latency
latency() { # NAME CLASS EXTRA_MS: report time - culprit call - EXTRA_MS
    t0=$(sed -n 's/^culprit_call_ms=//p' "$tmp/$1.out" | head -1)
    t1=$(cat "$tmp/$1"-*.log 2>/dev/null | grep "^ccshim $2 " | sed -n 's/.* at=\([0-9.]*\)\]$/\1/p' | sort -n | head -1)
    [ -n "$t0" ] && [ -n "$t1" ] && awk -v a="$t0" -v b="$t1" -v x="$3" 'BEGIN {printf "%.0f\n", b - a - x}'
}
measure() { # LABEL NP CLASS EXTRA_MS SCENARIO [ARGS] -- env...: median and max over REPS
    label=$1 np=$2 cls=$3 extra=$4 scen=$5; shift 5
    : > "$tmp/lat"
    for i in $(seq "$REPS"); do
        rm -f "$tmp/$label"-*.log
        mpirun_ "$np" env CCSHIM_ON_DESYNC=abort CCSHIM_LOG="$tmp/$label-%r.log" SETTLE_MS=600 "$@" "$run" \
            --mpi --summary 0 -- sh -c "${TWO:-exec \"\$@\"}" _ "$sc" $scen >"$tmp/$label.out" 2>/dev/null || true
        latency "$label" "$cls" "$extra" >> "$tmp/lat" || true
    done
    echo "$(bench_median < "$tmp/lat") $(maxof < "$tmp/lat") $(wc -l < "$tmp/lat")"
}
TWO=''
m1=$(measure mm 4 MISMATCH 0 "op")
d1=$(measure dd 4 DESYNC 0 "deadlock")
e1=$(measure ex 4 DESYNC 0 "exit")
# 12 communicators, more than a status holds; the odd call (seq 501 of 2000
# on the last one) completes, so the search finds it.
c1=$(measure many 4 MISMATCH 0 "op 2000 500" COMMS=12 SETTLE_MS=3000)
TWO='CCSHIM_DESYNC_HOST=h$((OMPI_COMM_WORLD_RANK / 2)) exec "$@"'
m2=$(measure tmm 4 MISMATCH 0 "op 5 2 2" CCSHIM_COORD=127.0.0.1:0)
d2=$(measure tdd 4 DESYNC 0 "deadlock" CCSHIM_COORD=127.0.0.1:0)
# A silent MISMATCH on one host: the test NCCL lets rank 1's count, one
# short in step 3 of the trainer's 1000, complete, so only the running
# hashes show it and the host's own search finds the seq.
silent() { # median max n over REPS, or "- - 0" without the NCCL trainer
    local T="$top_builddir/ccshim-trainer-nccl" lib="$top_builddir/tests/nccl" i r
    [ -x "$T" ] && [ -f "$lib/libnccl.so.2" ] || { echo "- - 0"; return; }
    : > "$tmp/lat"
    for i in $(seq "$REPS"); do
        rm -f "$tmp"/sil-*.log "$tmp/sil.id"
        for r in 0 1 2 3; do
            RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 CCSHIM_LOG="$tmp/sil-%r.log" CCSHIM_SUMMARY=0 \
                LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$run" --no-mpi -- "$T" \
                --device host --nccl-id-file "$tmp/sil.id" --inject=wrong-count:1:3 --steps 1000 \
                >"$tmp/sil-out-$r" 2>&1 &
        done
        wait
        cp "$tmp/sil-out-1" "$tmp/sil.out"
        latency sil MISMATCH 0 >> "$tmp/lat" || true
    done
    echo "$(bench_median < "$tmp/lat") $(maxof < "$tmp/lat") $(wc -l < "$tmp/lat")"
}
s1=$(silent)
echo "latency (median max n): mismatch $m1, deadlock $d1, exit $e1; tcp: mismatch $m2, deadlock $d2; silent $s1; 12 communicators $c1"

# 4. simulation: 1k to 131k ranks (8 a host).  A size that gives no result
# (the simulation refuses it, or no verdict within its time) is a row that
# says so, with the simulation's own words.
sim="$top_builddir/tests/desync/desync_sim"
: > "$tmp/sim"
# Each size three times: one coordinator for every host (as jobs below the
# tree's size run), and the tree (docs/desync.md, "The tree") of relays of
# G = ceil(sqrt(hosts)) hosts, given their ranks in process ("in process")
# or as a job runs it ("linked": every leader to the root first, relays
# appointed, leaders sent there; three descriptors a host in one process,
# so up to 16,384 ranks under the limit of 20,000).  The mode is the
# line's 17th column.
for n in ${SIM_SIZES:-1024 4096 16384 65536 131072}; do
  hosts=$(((n + 7) / 8))
  G=$(awk -v h="$hosts" 'BEGIN {g = int(sqrt(h)); if (g * g < h) g++; print g}')
  for mode in 0 "$G" "$G links"; do
    g=${mode%% *}
    links=""
    [ "$mode" = "$g" ] || links=links
    for s in healthy mismatch deadlock; do
        if ! CCSHIM_SUMMARY=0 timeout 300 "$sim" "$n" 8 "$SIM_SECONDS" "$s" "$g" $links >> "$tmp/sim" 2>"$tmp/sim.err"; then
            why=$(grep -m1 '^desync_sim:' "$tmp/sim.err" | sed 's/^desync_sim: //; s/|/\\|/g')
            # (a line was printed: a verdict other than the scenario's; none: refused or timed out)
            if [ -n "$why" ] || ! tail -1 "$tmp/sim" | grep -q "^$n	"; then
                printf '%s\t%s\t%s\tno result: %s\t-1\t-\t-\t-\t-\t-\t0\t0\t-\t%s\t0\t0\n' "$n" "$hosts" "$s" \
                    "${why:-timed out after 300 s}" "$([ "$g" = 0 ] && echo 0 || echo $(((hosts + g - 1) / g)))" >> "$tmp/sim"
            fi
            echo "(sim $n $s tree $g $links: wrong verdict or no result)" >&2
        fi
        sed -i '$ s/$/\t'"${links:-in-process}"'/' "$tmp/sim"
    done
  done
done
cat "$tmp/sim"
simrows=$(awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, ($14 > 0 ? $14 " relays, " ($17 == "links" ? "linked" : "in process") : "none"), $3, $4, ($5 < 0 ? "-" : $5 " ms"), ($6 == "-" ? "-" : $6 " %"), ($7 == "-" ? "-" : sprintf("%.1f MiB", $7)), ($8 == "-" ? "-" : $8 " KiB/s"), ($10 == "-" ? "-" : $10 " ms"), ($11 > 0 ? $11 " lines, " $12 " KiB (" $15 " ranks, " $16 " report)" : "-"), ($13 == "-" ? "-" : sprintf("%.1f s", $13 / 1000))}' "$tmp/sim")

fmt() { echo "$1" | awk '{printf "%s ms (max %s ms, %s runs)", $1, $2, $3}'; }
doc="$top_srcdir/docs/performance.md"
cpu=$(bench_cpu)
bench_write_section "$doc" desync <<MD
## Desync detection (docs/desync.md)

Measured by \`make bench\` (bench/desync-bench.sh) on $(date -u +%Y-%m-%d), $(nproc) cores ($cpu),
Open MPI $(mpirun --version 2>/dev/null | awk 'NR==1 {print $NF}'), default settings (period 20 ms, block threshold 1 s).

**Hot path.** Detection adds nothing to \`ccs_call_begin\`/\`ccs_call_end\`: the hot
path keeps each communicator's running hash whether detection is on or not, and the
background thread reads the rings, their in-flight records and the comm table.  End to
end, 8-byte MPI_Allreduce on 2 ranks, median of $TRIALS alternated
runs of $ITERS calls: $off ns/call with detection off, $on ns/call on
($(awk -v a="$off" -v b="$on" 'BEGIN {printf "%+.1f ns, ratio %.4f", b - a, b / a}'); the difference of two medians of a noisy loop).
On this 2-core machine the two ranks spin on both cores, so the background
thread's share below (about $(awk -v b="$busy" -v n="$on" 'BEGIN {printf "%.0f", b / 100 * n}') ns per call) comes out of the loop's own time:
that, not the hot path, is the difference (with a spare core it should not show; not measurable on 2 cores).

**Background thread** (its own CPU clock, the busiest rank): $idle % of a core while
3 ranks compute between all-reduces (target: at most 1 %), and $busy % while 2 ranks run
8-byte all-reduces flat out ($(awk -v n="$on" 'BEGIN {printf "%.0f", 1e9 / n}') calls/s per rank).  Its work per period does not
grow with the call rate: each 20 ms it reads at most the newest 512 records of a ring
and takes the running hash from the newest (the hot path computed it), so flat out it
costs about what it costs a job calling a few hundred times a second.  With 12
communicators, more than a status holds, which take turns in it (3 ranks, an all-reduce
on each in every iteration, flat out): $many %.  The thread runs
at nice 10, so where ranks outnumber cores it takes the gaps rather than their time.

**Detection latency** on one host (shared memory), from the culprit's call to the
first rank's report, $REPS runs each:

| case | latency (median) | target |
| --- | --- | --- |
| MISMATCH (rank 1 reduces with MAX) | $(fmt "$m1") | 100 ms |
| MISMATCH, silent: the test NCCL completes rank 1's all-reduce one element short (step 3 of 1000), found by the host's search | $(fmt "$s1") | 1 s |
| MISMATCH, silent, on the last of 12 communicators (rank 1 reduces with MAX at seq 501 of 2000; more communicators than a status holds), found by the host's search | $(fmt "$c1") | 1 s |
| DESYNC, real deadlock (both sides blocked) | $(fmt "$d1") | 2 s after the last rank blocks |
| DESYNC, a rank exits early | $(fmt "$e1") | 2 s |
| MISMATCH across 2 host identities over TCP | $(fmt "$m2") | 1 s |
| DESYNC deadlock across 2 host identities over TCP | $(fmt "$d2") | 2 s |

**Scale simulation** (tests/desync/desync_sim: the real coordinator and per-host
clients on loopback in one process; with the tree column, relays of
ceil(sqrt(hosts)) hosts each (docs/desync.md, "The tree"; jobs use it from 4,097
ranks on): "in process", the relay clients given their group's ranks in process
(the leaders' links not simulated), or "linked", the tree as a job runs it, every
host's client first at the root, which appoints a relay per group and sends the
other leaders there (three descriptors a host in one process: up to 16,384 ranks
under the limit of 20,000), 8 ranks per host, 50 collectives/s per rank;
every host's leader admitted first (the admission column), then
$SIM_SECONDS s: the fault halfway, CPU and traffic over the second half; a
2-core machine that also runs the simulated hosts, so latencies are upper
bounds; log: what the job's combined log holds for the verdict, the line from
one rank of each host and the full report from one rank of the job, as each
simulated rank decides it with the runtime's claim; the ranks that logged it
and the full reports written):

| ranks | hosts | tree | scenario | verdict | latency | coordinator CPU | coordinator memory | traffic in | slowest evaluation | log per verdict (all ranks) | admission |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
$simrows

Latency of the deadlock is dominated by the block threshold (1 s, CCSHIM_DESYNC_BLOCK_MS)
plus the confirmation wait (a quarter of it); a MISMATCH is reported as soon as both
operations are known.
MD
echo "updated $doc"
