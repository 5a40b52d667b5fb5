#!/bin/sh
# audit-hang.sh - the post-mortem of a job that hung or was aborted, on real
# 3-rank runs of tests/desync/desync_scenario skip (rank 1 leaves out the
# third all-reduce; ranks 0 and 2 block in their fifth): under warn the job
# hangs and the launcher's timeout kills it (SIGTERM), under abort the
# detector ends it.  The blocked call is in the traces (written at the
# signal, as not completed), the audit names the culprit and the call, each
# rank's state, one finding per runtime verdict, ranks killed by a signal
# as killed.  Ranks killed by SIGKILL (an abort's launcher, a batch
# system past its grace) write no trace end: their flight dumps, written at
# the verdict, still name the call and its site.  And a trace directory others can write to: the job's files
# are in DIR/ccshim-UID-JOB, which ccshim-audit DIR reads.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
tap_plan 18
D=$CCS_TMP
# The all-reduce's line in the scenario (the site the audit names).
LINE=$(grep -n '^        iteration_call(scenario, culprit_now' "$top_srcdir/tests/desync/desync_scenario.c" | cut -d: -f1)
SITE="desync_scenario.c:$LINE"
TITLE="rank 1 left out allreduce at $SITE; ranks 0,2 blocked in it"

# warn: nothing ends the job.  Its ranks are sent SIGTERM, as a batch
# system's time limit does, once every rank has written its verdict.
# (Not through mpirun: on its own SIGTERM Open MPI 4.1's mpirun at times
# ends its ranks with SIGKILL before they have run a handler.)  Rank 1
# waits in MPI_Finalize, where the MPI library may take the signal itself:
# its trace then ends with MPI_Finalize's END chunk and no exit's.
R1_END='(killed by signal 15|finalized, no exit recorded after it)'
dsx_run warn 40 3 -- "$SCENARIO" skip &
JOB=$!
n=0
while [ "$(ls "$D/warn/trace"/ccshim-desync-warn-r*.txt 2> /dev/null | wc -l)" -lt 3 ] && [ $n -lt 200 ]; do
    sleep 0.1
    n=$((n + 1))
done
sleep 0.5 # the reports' last lines
PIDS=$(ls "$D/warn/trace"/*.cctrace 2> /dev/null | sed -n 's/.*-p\([0-9]*\)\.cctrace$/\1/p')
alive=0
for p in $PIDS; do kill -0 "$p" 2> /dev/null && alive=$((alive + 1)); done
tap_eq "warn: the job hangs (3 ranks alive after their verdicts)" 3 "$alive"
# shellcheck disable=SC2086
kill -TERM $PIDS 2> /dev/null
wait "$JOB"
T=$D/warn/trace
"$CCSHIM_AUDIT" "$T" > "$D/warn.txt" 2> "$D/warn.err"
"$CCSHIM_AUDIT" --json "$T" > "$D/warn.json" 2> /dev/null
"$CCSHIM_AUDIT" --tsv-records "$T" > "$D/warn.tsv" 2> /dev/null
tap_eq "warn: every call in the traces, the blocked ones too (5 + 4 + 5 all-reduces)" 14 \
    "$(awk -F'\t' '$4 == "allreduce"' "$D/warn.tsv" | wc -l | tr -d ' ')"
tap_eq "warn: every record's site described where it is read (definitions before records)" 0 \
    "$(awk -F'\t' 'NR > 1 && $14 == "-"' "$D/warn.tsv" | wc -l | tr -d ' ')"
tap_check "warn: the ranks are listed as killed by signal 15 (rank 1 in MPI_Finalize: or complete)" \
    grep -Eqx "ccshim-audit: 3 traces \((0 complete, 3|1 complete, 2) killed by signal 15, 0 cut short, 0 unreadable\), job warn on $(hostname) \.\.\." "$D/warn.txt"
tap_eq "warn: the post-mortem names the culprit and the call" "  1. [error] $TITLE" \
    "$(grep '^  1\. ' "$D/warn.txt")"
# The call site with the most time, in the time table's 52 columns: the
# call's own line whole, the inlined helper cut (both ends of the name kept
# the helper's line instead: desync_scenario.c:167).
tap_eq "warn: the time table's costliest site is the call's own line" \
    "main at $SITE (inlined ...)" \
    "$(grep -A1 '^     collectives   share         wait   share  site$' "$D/warn.txt" | tail -1 | sed 's/.*%  //')"
json_q "$D/warn.json" "d['findings'][0]['evidence']" > "$D/warn.evidence"
tap_check "warn: what each rank was doing at seq 5" grep -Eqx \
    "comm [0-9a-f]* \(3 ranks\), seq 5, the first that not every rank reached; ranks 0,2: blocked in allreduce at $SITE since [0-9:.]* UTC for [0-9.]*(-[0-9.]*)? s; killed by signal 15; rank 1: not in a collective; $R1_END" \
    "$D/warn.evidence"
tap_eq "warn: one finding for the runtime's verdict (three reports), its line whole" \
    "1 ranks 0,2 blocked in allreduce(count=4, float32, sum) at seq 5 for" \
    "$(grep -c 'runtime verdict: DESYNC comm=0x[0-9a-f]* size=3 seq=5 (reported by ranks 0-2)$' "$D/warn.txt") $(json_q "$D/warn.json" "[f['evidence'] for f in d['findings'] if f['kind'] == 'desync-reports'][0][:66]")"
tap_check "warn: --json: the post-mortem finding and each rank's end" \
    test "$(json_q "$D/warn.json" "d['findings'][0]['kind'] + ' ' + ' '.join('%s %d' % (x['end']['reason'], x['end']['signal']) for x in d['files'])" |
        sed 's/^post-mortem signal 15 \(signal 15\|finalize 0\) signal 15$/ok/')" = ok
"$CCSHIM_AUDIT" --tsv-time "$T" > "$D/warn.time" 2> /dev/null
tap_eq "warn: the calls never completed are all wait (step 4: ranks 0 and 2, wait = time, over 1 s)" "0 2" \
    "$(awk -F'\t' '$1 == 4 && $3 == $4 && $3 > 1000000000 {print $2}' "$D/warn.time" | paste -sd' ')"

# kill: rank 0 killed by SIGKILL after its verdict (no trace end, no call
# in progress in its trace): named from its flight dump; the others are
# then ended by the launcher or by the test (SIGTERM).
dsx_run kill 40 3 -- "$SCENARIO" skip &
JOB=$!
n=0
while [ "$(ls "$D/kill/trace"/ccshim-flight-kill-r*.flight 2> /dev/null | wc -l)" -lt 3 ] && [ $n -lt 200 ]; do
    sleep 0.1
    n=$((n + 1))
done
sleep 0.5
PIDS=$(ls "$D/kill/trace"/*.cctrace 2> /dev/null | sed -n 's/.*-r0-p\([0-9]*\)\.cctrace$/\1/p')
kill -KILL $PIDS 2> /dev/null
sleep 0.5
PIDS=$(ls "$D/kill/trace"/*.cctrace 2> /dev/null | sed -n 's/.*-r[12]-p\([0-9]*\)\.cctrace$/\1/p')
# shellcheck disable=SC2086
kill -TERM $PIDS 2> /dev/null
wait "$JOB"
"$CCSHIM_AUDIT" "$D/kill/trace" > "$D/kill.txt" 2> /dev/null
tap_eq "kill: the post-mortem names the culprit and the call (from the flight dumps)" "  1. [error] $TITLE" \
    "$(grep '^  1\. ' "$D/kill.txt")"
"$CCSHIM_AUDIT" --json "$D/kill/trace" 2> /dev/null > "$D/kill.json"
tap_check "kill: rank 0 blocked in allreduce at its site, from its flight dump" grep -Eq \
    "; rank 0: blocked in allreduce at $SITE \(its flight dump\); died without ending its trace \(killed by SIGKILL, or still running\); " \
    "$(json_q "$D/kill.json" "d['findings'][0]['evidence']" > "$D/kill.evidence"; echo "$D/kill.evidence")"

# abort: the detector ends the job (MPI_Abort); the launcher kills the rest.
dsx_run abort 40 3 CCSHIM_ON_DESYNC=abort -- "$SCENARIO" skip
tap_check "abort: the job ended with a failure status ($DSX_RC), before the timeout" \
    test "$DSX_RC" -ne 0 -a "$DSX_RC" -ne 124
"$CCSHIM_AUDIT" "$D/abort/trace" > "$D/abort.txt" 2> /dev/null
tap_eq "abort: the post-mortem names the culprit and the call" "  1. [error] $TITLE" \
    "$(grep '^  1\. ' "$D/abort.txt")"
tap_check "abort: no rank listed as complete" grep -q '^ccshim-audit: 3 traces (0 complete, ' "$D/abort.txt"

# A trace directory others can write to (as /tmp): the job's files in a
# subdirectory of the user's own, read by ccshim-audit DIR.
S=$D/shared
mkdir -p "$S" && chmod 1777 "$S"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$S" CCSHIM_JOB_ID=one CCSHIM_SUMMARY=0 "$CCSHIM_RUN" --mpi -- \
    "$SCENARIO" ok 3 > /dev/null 2>&1
"$CCSHIM_AUDIT" "$S" > "$D/s1.txt" 2> "$D/s1.err"
tap_eq "shared dir, one job: read from its subdirectory, said in one line" \
    "ccshim-audit: $S holds no trace of its own: reading $S/ccshim-$(id -u)-one (a job's files in a directory others can write to)|ccshim-audit: 2 traces (2 complete, 0 cut short, 0 unreadable), job one on $(hostname) ..." \
    "$(cat "$D/s1.err")|$(head -1 "$D/s1.txt")"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$S" CCSHIM_JOB_ID=two CCSHIM_SUMMARY=0 "$CCSHIM_RUN" --mpi -- \
    "$SCENARIO" ok 3 > /dev/null 2>&1
"$CCSHIM_AUDIT" "$S" > /dev/null 2> "$D/s2.err"
rc=$?
tap_eq "shared dir, two jobs: both subdirectories read, refused naming both jobs (status 2)" "2 1 1" \
    "$rc $(grep -c "^ccshim-audit: $S holds no trace of its own: reading its 2 subdirectories $S/ccshim-$(id -u)-\* " "$D/s2.err") $(grep -c "different jobs, which must not be counted together: .*one.*two" "$D/s2.err")"
"$CCSHIM_AUDIT" --job two "$S" > "$D/s3.txt" 2> /dev/null
tap_eq "shared dir, --job two: that job's traces" \
    "ccshim-audit: 2 traces (2 complete, 0 cut short, 0 unreadable), job two on $(hostname) ..." "$(head -1 "$D/s3.txt")"
tap_done
