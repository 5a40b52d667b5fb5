#!/bin/sh
# metrics.sh - live metrics (CCSHIM_METRICS, ccshim-run --metrics): on 2 MPI
# ranks, promtool accepts each rank's file; its all-reduce total, coalesced
# and real reductions and steps equal what ccshim-audit counts in the same
# run's traces; a reader sees the counts grow while a job runs; a MISMATCH
# appears in ccshim_verdicts_total as often as in the rank's log; a bad
# destination costs one log line and not the job; a pattern without %r is
# refused; a clean exit removes the file; node_exporter's textfile
# collector serves two concurrent jobs' files side by side.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$CCSHIM_TRAINER" ] || tap_skip_all "ccshim-trainer not built"
SCENARIO="$top_builddir/tests/desync/desync_scenario"
tap_plan 25
D=$CCS_TMP

# metric FILE NAME [LABEL-REGEX]: the sum of NAME's samples whose labels match.
metric() {
    awk -v n="$2" -v re="${3:-.}" '$1 ~ "^" n "[{ ]" && $1 ~ re { s += $NF } END { printf "%d\n", s }' "$1"
}
# audit_count TRACEDIR RANK KIND DEFERRED(0|1|any): calls the audit counts.
audit_count() {
    "$CCSHIM_AUDIT" --tsv --no-symbols "$1" |
        awk -F '\t' -v r="$2" -v k="$3" -v d="$4" '!/^#/ && $2 == r && $4 == k && (d == "any" || $7 == d) { s += $5 }
            END { printf "%d\n", s }'
}

# 1. 3 steps of 8 mini-batches, coalescing every:8: 24 all-reduces per rank, 21 deferred.
ccs_mpirun 120 2 "$CCSHIM_RUN" --trace-dir "$D/tr" --metrics "$D/m-%r.prom" --metrics-period-ms 50 --metrics-keep 1 \
    --coalesce every:8 -- "$CCSHIM_TRAINER" --batch 32 --mini-batch 4 --steps 3 > "$D/run.out" 2>&1
rc=$?
tap_eq "job ran, one file per rank, no temporary file left" "0 m-0.prom m-1.prom" \
    "$rc $(cd "$D" && ls m-* | paste -sd ' ' -)"
if command -v promtool > /dev/null 2>&1; then
    for r in 0 1; do
        tap_check "rank $r: promtool check metrics accepts the file" sh -c 'promtool check metrics < "$1"' _ "$D/m-$r.prom"
    done
else
    tap_skip "rank 0: promtool check metrics accepts the file" "promtool not installed (Debian package: prometheus)"
    tap_skip "rank 1: promtool check metrics accepts the file" "promtool not installed (Debian package: prometheus)"
fi
for r in 0 1; do
    tap_eq "rank $r: all-reduce total = the audit's (24)" "24 $(audit_count "$D/tr" $r allreduce any)" \
        "$(metric "$D/m-$r.prom" ccshim_collectives_total 'kind="allreduce"') $(metric "$D/m-$r.prom" ccshim_collectives_total 'kind="allreduce"')"
done
tap_eq "rank 0: coalesced = the audit's deferred (21), real reductions = the rest (3)" \
    "21 3 = $(audit_count "$D/tr" 0 allreduce 1) $(audit_count "$D/tr" 0 allreduce 0)" \
    "$(metric "$D/m-0.prom" ccshim_coalesced_total) $(metric "$D/m-0.prom" ccshim_real_reductions_total) = $(metric "$D/m-0.prom" ccshim_coalesced_total) $(metric "$D/m-0.prom" ccshim_real_reductions_total)"
tap_eq "rank 0: bytes of the all-reduces = the audit's" \
    "$("$CCSHIM_AUDIT" --tsv --no-symbols "$D/tr" | awk -F '\t' '$2 == 0 && $4 == "allreduce" { s += $6 } END { print s }')" \
    "$(metric "$D/m-0.prom" ccshim_bytes_total 'kind="allreduce"')"
tap_eq "rank 1: steps 3, no verdict, no record lost, the detector ran" "3 0 0 yes" \
    "$(metric "$D/m-1.prom" ccshim_steps_total) $(metric "$D/m-1.prom" ccshim_verdicts_total) $(metric "$D/m-1.prom" ccshim_records_lost_total) $(grep -Eq '^ccshim_desync_last_pass_timestamp_seconds\{rank="1",ccshim_job="[^"]+"\} [1-9][0-9]{9}\.[0-9]+$' "$D/m-1.prom" && echo yes)"
tap_eq "every sample carries its rank and the job's id (ccshim_job, not Prometheus's reserved job)" 0 \
    "$(grep -v '^#' "$D/m-1.prom" | grep -vc '^[a-z_]*{rank="1",ccshim_job="[^"]\{1,\}"')"
# Time in collectives: every all-reduce series has some, none more than the
# job lasted.
tap_check "rank 0: ccshim_collective_seconds_total of its all-reduces is > 0 and < 120 s" \
    awk '$1 ~ /^ccshim_collective_seconds_total\{.*kind="allreduce"/ { n++; if ($2 <= 0 || $2 >= 120) bad++ } END { exit !(n > 0 && !bad) }' "$D/m-0.prom"

# 2. A reader polls rank 0's file while a job of 1500 steps runs: the
# all-reduce total seen grows, and ends at 8 x 1500.
(
    ccs_mpirun 300 2 "$CCSHIM_RUN" --metrics "$D/g-%r.prom" --metrics-period-ms 50 --metrics-keep 1 -- "$CCSHIM_TRAINER" \
        --batch 32 --mini-batch 4 --steps 1500 > "$D/grow.out" 2>&1
    echo $? > "$D/grow.rc"
) &
job=$!
: > "$D/seen"
while [ ! -f "$D/grow.rc" ]; do
    [ -f "$D/g-0.prom" ] && metric "$D/g-0.prom" ccshim_collectives_total 'kind="allreduce"' >> "$D/seen"
    sleep 0.1
done
wait $job
# Values read before the job ended, in order: more than one, never decreasing.
tap_eq "growing job: exit 0" 0 "$(cat "$D/grow.rc")"
tap_check "a reader saw the all-reduce count grow while the job ran ($(sort -nu "$D/seen" | wc -l | tr -d ' ') values)" \
    sh -c 'test "$(sort -nu "$1" | awk "\$1 > 0" | wc -l)" -ge 2 && sort -nc "$1"' _ "$D/seen"
tap_eq "growing job: the last file counts every all-reduce (12000)" 12000 \
    "$(metric "$D/g-0.prom" ccshim_collectives_total 'kind="allreduce"')"

# 3. A MISMATCH (rank 1 reduces with max where rank 0 sums), under warn:
# counted once on each rank, and logged once in the job (one host: one
# rank logs a verdict, docs/desync.md).
if [ -x "$SCENARIO" ]; then
    ccs_mpirun 60 2 env CCSHIM_LOG="$D/v-log-%r.txt" CCSHIM_SUMMARY=0 SETTLE_MS=600 "$CCSHIM_RUN" --mpi \
        --metrics "$D/v-%r.prom" --metrics-keep 1 -- "$SCENARIO" op > "$D/v.out" 2>&1
    for r in 0 1; do
        tap_eq "rank $r: ccshim_verdicts_total{class=\"MISMATCH\"} = 1 = the job's MISMATCH lines" "1 1" \
            "$(metric "$D/v-$r.prom" ccshim_verdicts_total 'class="MISMATCH"') $(cat "$D"/v-log-*.txt | grep -c '^ccshim MISMATCH ')"
    done
else
    tap_skip "rank 0: ccshim_verdicts_total{class=\"MISMATCH\"} = 1 = the job's MISMATCH lines" "desync_scenario not built"
    tap_skip "rank 1: ccshim_verdicts_total{class=\"MISMATCH\"} = 1 = the job's MISMATCH lines" "desync_scenario not built"
fi

# 4. A destination that cannot be written: one warning per rank, the job's
# result that of the same job in 1.
ccs_mpirun 120 2 "$CCSHIM_RUN" --metrics "$D/no/such/dir/m-%r.prom" --coalesce every:8 -- "$CCSHIM_TRAINER" \
    --batch 32 --mini-batch 4 --steps 3 > "$D/bad.out" 2> "$D/bad.err"
rc=$?
tap_eq "unwritable destination: exit 0, the same losses" "0 $(grep -o '"losses":\[[^]]*\]' "$D/run.out")" \
    "$rc $(grep -o '"losses":\[[^]]*\]' "$D/bad.out")"
tap_eq "unwritable destination: one warning per rank" 2 \
    "$(grep -c "CCSHIM_METRICS: cannot write '$D/no/such/dir/m-[01].prom.tmp'" "$D/bad.err")"

# 5. A clean exit removes the file (a live view: node_exporter would serve a
# finished job's series for ever); a pattern without %r is refused.
ccs_mpirun 120 2 "$CCSHIM_RUN" --metrics "$D/gone-%r.prom" --metrics-period-ms 50 -- "$CCSHIM_TRAINER" \
    --batch 32 --mini-batch 4 --steps 3 > "$D/gone.out" 2>&1
tap_eq "clean exit: exit 0 and no file left" "0 " "$? $(cd "$D" && ls gone-* 2>/dev/null | paste -sd ' ' -)"
"$CCSHIM_RUN" --metrics "$D/one.prom" -- "$CCSHIM_TRAINER" --steps 1 > "$D/one0.out" 2>&1
tap_eq "pattern without %r: ccshim-run refuses it before launch (exit 2, the value and what is expected)" "2 1" \
    "$? $(grep -c "^ccshim-run: CCSHIM_METRICS='$D/one.prom' (option --metrics): expected a pattern that names the rank (%r)" "$D/one0.out")"
# (preloaded without ccshim-run, the library refuses it too, and the job runs)
ccs_mpirun 120 2 env LD_PRELOAD="$top_builddir/.libs/libccshim-mpi.so" CCSHIM_METRICS="$D/one.prom" \
    CCSHIM_METRICS_KEEP=1 "$CCSHIM_TRAINER" --batch 32 --mini-batch 4 --steps 3 > "$D/one.out" 2> "$D/one.err"
tap_eq "pattern without %r, preloaded: exit 0, no file, one warning per rank naming the pattern" "0 no 2" \
    "$? $([ -e "$D/one.prom" ] && echo yes || echo no) $(grep -c "CCSHIM_METRICS='$D/one.prom' does not name the rank (%r)" "$D/one.err")"

# 6. Two jobs at once on one node, the pattern docs/metrics.md recommends,
# read by a real node_exporter's textfile collector on a loopback port:
# both jobs' series served, no collector error, promtool clean; each file's
# last-update time current while it runs, and both files gone at the end.
NE=$(command -v prometheus-node-exporter || command -v node_exporter || true)
if [ -n "$NE" ] && command -v curl > /dev/null 2>&1 && [ -x "$SCENARIO" ]; then
    mkdir -p "$D/tf"
    port=$(ccs_ports 1)
    "$NE" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$D/tf" > "$D/ne.log" 2>&1 &
    ne=$!
    jobs=""
    for j in a b; do
        (
            # (paced by sleeps, 150 all-reduces 100 ms apart: the two jobs
            # overlap however busy the cores are)
            ccs_mpirun 300 2 env CCSHIM_JOB_ID="train-$j" ITER_MS=100 "$CCSHIM_RUN" --mpi \
                --metrics "$D/tf/ccshim-%j-%r.prom" --metrics-period-ms 100 -- "$SCENARIO" ok 150 \
                > "$D/ne-$j.out" 2>&1
            echo $? > "$D/ne-$j.rc"
        ) &
        jobs="$jobs $!"
    done
    # Scrape once all four files are there and both jobs still run.
    i=0
    while [ "$(ls "$D/tf" 2>/dev/null | grep -c '\.prom$')" -lt 4 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    sleep 0.5
    curl -s "http://127.0.0.1:$port/metrics" > "$D/scrape.txt"
    now=$(date +%s)
    tap_eq "node_exporter: both jobs' all-reduce series, 2 ranks each" "train-a:0 train-a:1 train-b:0 train-b:1" \
        "$(sed -n 's/^ccshim_collectives_total{.*ccshim_job="\([^"]*\)".*kind="allreduce".*rank="\([0-9]\)".*/\1:\2/p;
                   s/^ccshim_collectives_total{ccshim_job="\([^"]*\)".*rank="\([0-9]\)".*kind="allreduce".*/\1:\2/p' "$D/scrape.txt" |
            sort -u | paste -sd ' ' -)"
    tap_eq "node_exporter: no textfile collector error" "node_textfile_scrape_error 0 none" \
        "$(grep '^node_textfile_scrape_error ' "$D/scrape.txt") $(grep -c 'collected before\|error' "$D/ne.log" | sed 's/^0$/none/')"
    if command -v promtool > /dev/null 2>&1; then
        tap_check "node_exporter: promtool check metrics accepts what it serves" \
            sh -c 'grep -v "^go_\|^# HELP go_\|^# TYPE go_" "$1" | promtool check metrics' _ "$D/scrape.txt"
    else
        tap_skip "node_exporter: promtool check metrics accepts what it serves" "promtool not installed (Debian package: prometheus)"
    fi
    tap_check "a running job's ccshim_last_update_timestamp_seconds is within 5 s of now" \
        awk -v now="$now" '$1 ~ /^ccshim_last_update_timestamp_seconds\{/ { n++; d = now - $2; if (d < -5 || d > 5) bad++ }
            END { exit !(n == 4 && !bad) }' "$D/scrape.txt"
    # shellcheck disable=SC2086
    wait $jobs
    kill "$ne" 2>/dev/null
    wait "$ne" 2>/dev/null
    tap_eq "both jobs exit 0 and leave no file" "0 0 " "$(cat "$D/ne-a.rc") $(cat "$D/ne-b.rc") $(ls "$D/tf" | paste -sd ' ' -)"
else
    for t in "both jobs' all-reduce series" "no textfile collector error" "promtool check metrics" \
        "last update within 5 s" "both jobs exit 0 and leave no file"; do
        tap_skip "node_exporter: $t" "prometheus-node-exporter, curl or desync_scenario missing"
    done
fi
tap_done
