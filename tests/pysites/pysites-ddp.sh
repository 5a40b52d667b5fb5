#!/bin/sh
# pysites-ddp.sh - `ccshim-run --torch` names the Python line behind each
# collective (docs/python-sites.md), on real PyTorch DDP: Debian's torch on
# CPU over gloo, DDP's bucket reductions sent through MPI by an mpi4py comm
# hook (tests/pysites/pysites_job.py), 2 ranks under mpirun.
#   - the audit's redundancy finding, its per-step pattern and its top call
#     sites name the script's backward() line, with exact call counts;
#   - two explicit dist.all_reduce lines are told apart;
#   - JSON, HTML, the Chrome trace and the OTF2 archive (its events' source
#     code locations) carry the line;
#   - a rank that skips one mini-batch: a DESYNC naming the step, and the
#     backward line for both ranks;
#   - without --torch no record carries a Python site.
. "$top_srcdir/tests/tap.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || tap_skip_all "no /usr/bin/python3"
"$PY" -c 'import torch, torch.distributed, mpi4py' 2>/dev/null ||
    tap_skip_all "torch or mpi4py not installed for /usr/bin/python3 (apt-get install python3-torch python3-mpi4py)"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
tap_plan 19

job="$top_srcdir/tests/pysites/pysites_job.py"
line_of() { grep -n "# LINE:$1\$" "$job" | cut -d: -f1; }
LB=$(line_of backward)
LA=$(line_of explicit_a)
LBB=$(line_of explicit_b)
LF=$(line_of final_barrier)
PYTHONDONTWRITEBYTECODE=1 # nothing written into the source tree
export PYTHONDONTWRITEBYTECODE

# run NAME SECONDS TORCHFLAG [VAR=VALUE...] -- ARGS: the job on 2 ranks; RC set.
run() {
    local name=$1 secs=$2 flag=$3 d="$CCS_TMP/$1"
    shift 3
    mkdir -p "$d/trace"
    local envs=""
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    local port
    port=$(ccs_ports 2) # MASTER_PORT, and the coordinator's at + 1
    # shellcheck disable=SC2086
    ccs_mpirun "$secs" 2 env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CCSHIM_LOG="$d/log-%r.txt" \
        CCSHIM_TRACE_DIR="$d/trace" CCSHIM_SUMMARY=0 CCSHIM_JOB_ID="$name" $envs \
        "$CCSHIM_RUN" --mpi $flag -- "$PY" "$job" "$@" >"$d/out" 2>"$d/err"
    RC=$?
}
diag() {
    for f in "$CCS_TMP/$1"/out "$CCS_TMP/$1"/err "$CCS_TMP/$1"/log-*.txt; do
        [ -f "$f" ] && { echo "--- $f"; head -40 "$f"; }
    done | tap_diag
}

# --- a healthy job: 3 steps of 4 mini-batches, two explicit all-reduces per step
run ok 120 --torch -- --steps 3 --mini 4 --explicit
tap_eq "the job runs and both ranks finish with the same weights" "0 1" \
    "$RC $(grep -o 'weight_sum .*' "$CCS_TMP/ok/out" | sort -u | wc -l | tr -d ' ')"
[ "$RC" -eq 0 ] || diag ok
"$CCSHIM_AUDIT" "$CCS_TMP/ok/trace" >"$CCS_TMP/ok/audit.txt" 2>"$CCS_TMP/ok/audit.err"
A="$CCS_TMP/ok/audit.txt"
# Top call sites: one line per Python line, with its exact count over both ranks
# (backward: 3 steps x 4 mini-batches x 2 ranks; each explicit line: 3 x 2).
count_of() { grep -E "^ +[0-9]+ .* pysites_job\.py:$1 in <module> \|" "$A" | awk '{print $1}'; }
tap_eq "top call sites: the backward line, 24 reductions" 24 "$(count_of "$LB")"
tap_eq "top call sites: explicit all_reduce at line $LA, 6 calls" 6 "$(count_of "$LA")"
tap_eq "top call sites: explicit all_reduce at line $LBB, 6 calls" 6 "$(count_of "$LBB")"
tap_check "the redundancy finding's evidence names the backward line" sh -c \
    'tr -s " \n" " " < "$1" | grep -Eq "reduced one [0-9.]+ [KMG]?i?B buffer \([^)]*\) [0-9]+ times \(from pysites_job\.py:$2 in <module> \|"' \
    _ "$A" "$LB"
tap_check "... and its action says to wrap that backward in no_sync()" sh -c \
    'tr -s " \n" " " < "$1" | grep -q "wrap the backward at pysites_job.py:$2 in <module> in DDP'"'"'s no_sync()"' _ "$A" "$LB"
tap_check "the per-step pattern of step 2 names the backward line, 4 times" sh -c \
    'awk "/^step 2\$/,/^step 3\$/" "$1" | tr -s " \n" " " | grep -q "allreduce 1[.,]3 KiB @buf[0-9]* from pysites_job.py:$2 x4"' _ "$A" "$LB"
tap_check "the patterns tell the two explicit lines apart" sh -c \
    'awk "/^step 2\$/,/^step 3\$/" "$1" | tr -s " \n" " " | grep -q "allreduce 12 B @buf[0-9]* from pysites_job.py:$2, allreduce 20 B @buf[0-9]* from pysites_job.py:$3,"' \
    _ "$A" "$LA" "$LBB"
"$CCSHIM_AUDIT" --json "$CCS_TMP/ok/trace" >"$CCS_TMP/ok/a.json" 2>/dev/null
# (the last line: mpi4py's own comm.Barrier(), named since --torch implies --python)
tap_eq "JSON: each site's python line and count" \
    "24 pysites_job.py:$LB in <module>;6 pysites_job.py:$LA in <module>;6 pysites_job.py:$LBB in <module>;2 pysites_job.py:$LF in <module>;" \
    "$("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("".join("%d %s;" % (s["count"], s["python"]) for s in d["sites"] if s["python"]))' "$CCS_TMP/ok/a.json")"
OTF2=
grep -q '^#define HAVE_OTF2 1' "$top_builddir/config.h" && command -v otf2-print >/dev/null 2>&1 && OTF2=1
"$CCSHIM_AUDIT" --html "$CCS_TMP/ok/a.html" --chrome-trace "$CCS_TMP/ok/a.chrome.json" \
    ${OTF2:+--otf2 "$CCS_TMP/ok/otf2"} "$CCS_TMP/ok/trace" >/dev/null 2>&1
tap_check "HTML: the top call sites name the backward line" grep -q "pysites_job.py:$LB in &lt;module&gt; |" \
    "$CCS_TMP/ok/a.html"
tap_eq "Chrome trace: every all-reduce event carries its line (24 + 6 + 6)" "24 6 6" "$("$PY" -c '
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
sites = [e.get("args", {}).get("site", "") for e in ev if e.get("ph") == "X"]
print(*[sum(1 for s in sites if s.startswith("pysites_job.py:%s in " % l)) for l in sys.argv[2:]])' \
    "$CCS_TMP/ok/a.chrome.json" "$LB" "$LA" "$LBB")"
if [ -n "$OTF2" ]; then
    otf2-print "$CCS_TMP/ok/otf2/traces.otf2" >"$CCS_TMP/ok/otf2.txt" 2>/dev/null
    tap_eq "OTF2: every all-reduce's Enter has its Python line as source code location (24 + 6 + 6)" "24 6 6" \
        "$(for l in "$LB" "$LA" "$LBB"; do
            grep -c "(\"SOURCE_CODE_LOCATION\" <[0-9]*>; SOURCE_CODE_LOCATION; \"pysites_job.py:$l\" <" "$CCS_TMP/ok/otf2.txt"
        done | paste -sd ' ' -)"
else
    tap_skip "OTF2: every all-reduce's Enter has its Python line" "built without OTF2, or no otf2-print (otf2-tools)"
fi

# --- without --torch: the same job, no Python site anywhere
run plain 120 "" -- --steps 2 --mini 2
"$CCSHIM_AUDIT" --json "$CCS_TMP/plain/trace" >"$CCS_TMP/plain/a.json" 2>/dev/null
tap_eq "without --torch: the job runs, no site has a Python line" "0 0" "$RC $("$PY" -c '
import json, sys
print(sum(1 for s in json.load(open(sys.argv[1]))["sites"] if s["python"]))' "$CCS_TMP/plain/a.json")"

# --- rank 1 skips its last mini-batch of step 1: DESYNC, the job ends (abort)
run skip 90 --torch CCSHIM_ON_DESYNC=abort -- --steps 4 --mini 4 --skip 1:1
if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ]; then tap_ok "skip: the job ends with an error (exit $RC)"
else tap_not_ok "skip: the job ends with an error (exit $RC)"; diag skip; fi
L="$CCS_TMP/skip/log-0.txt"
tap_check "a DESYNC names step 1 and both counts (rank 1 issued fewer collectives in it)" \
    grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=2 seq=[0-9]+: .*in step 1 rank 0 issued 4, rank 1 issued 3" "$L"
for r in 0 1; do
    tap_check "the report names the backward line for rank $r" grep -Eq \
        "^ccshim desync\|   rank $r \(comm rank $r, .*(blocked .* in|last completed seq [0-9]+ step [0-9]+ at) pysites_job\.py:$LB in <module> \|" "$L"
done
tap_check "the reporting rank's own block names its Python line" \
    grep -q "^ccshim desync|   python: pysites_job.py:$LB in <module>\$" "$L"
# ... and the line of its own operation at the verdict's sequence number.
vseq=$(sed -n 's/^ccshim DESYNC comm=0x[0-9a-f]* size=2 seq=\([0-9]*\):.*/\1/p' "$L" | head -1)
tap_check "rank 0 names its Python line at the verdict's seq ($vseq)" sh -c \
    'grep -q "^ccshim desync| python line of rank 0 at seq $2 (the verdict'"'"'s): pysites_job.py:$3 in <module>\$" "$1" ||
     grep -A1 "^ccshim desync| stack of rank 0 at seq $2 " "$1" | grep -q "python: pysites_job.py:$3 in "' _ "$L" "$vseq" "$LB"
[ "$TAP_FAILED" -eq 0 ] || { diag skip; tap_diag <"$A"; }
tap_done
