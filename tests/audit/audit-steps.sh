#!/bin/sh
# audit-steps.sh - each rank's steps come from its own trace (issue 41): a
# rank that never ended its step 0 (no markers: a cached loss, 8 reductions
# per step) beside one that marked 6 steps (a plain loss, 1 per step) is not
# given steps inferred from its stream and applied to the other; the ranks'
# different step structures are a finding.  Without markers anywhere, each
# rank's steps are inferred from its own calls, and different periods are a
# finding too.  Ranks alike: no such finding.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 7
D=$CCS_TMP
q() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# calls NAME STEP RANK: rank RANK's all-reduces in step STEP (NAME.json's steps)
calls() {
    q "$D/$1.json" "sum(k['count'] for s in d['steps'] if s['step'] == $2 for r in s['ranks'] if r['rank'] == $3 for c in r['comms'] for k in c['calls'] if k['kind'] == 'allreduce')"
}

"$MKTRACE" --ranks 2 --steps 6 --micro 8 --micro-of 1:1 --unmarked 0 --no-allgather "$D/m"
"$CCSHIM_AUDIT" --json "$D/m" > "$D/m.json"
tap_eq "rank 1 marked 6 steps, rank 0 none: steps from markers" "markers" "$(q "$D/m.json" 'd["steps_source"]')"
tap_eq "rank 0's 96 all-reduces all in its step 0; rank 1's 2 a step (2 buckets), steps 0-5" "96 2 2 0" \
    "$(calls m 0 0) $(calls m 0 1) $(calls m 5 1) $(calls m 5 0)"
tap_eq "a step-structure finding naming ranks 0 and 1" \
    "step-structure [0, 1] the ranks' steps differ: rank 0 never ended its step 0 where rank 1 reached step 5" \
    "$(q "$D/m.json" '" ".join("%s %s %s" % (f["kind"], f["ranks"], f["title"]) for f in d["findings"] if f["kind"] == "step-structure")')"

"$MKTRACE" --ranks 2 --steps 6 --micro 8 --micro-of 1:1 --no-markers "$D/i"
"$CCSHIM_AUDIT" --json "$D/i" > "$D/i.json"
tap_eq "no markers (and an all-gather a step): inferred, rank 0's period (17 calls) from rank 0's stream" "inferred 17" \
    "$(q "$D/i.json" 'd["steps_source"], d["inference"]["period"]' | tr -d "(),'")"
tap_eq "... rank 1's steps from its own stream: 2 calls in each of its steps 0 and 5" "2 2" "$(calls i 0 1) $(calls i 5 1)"
tap_eq "... a step-structure finding: periods 3 and 17" \
    "step-structure the ranks' steps differ: rank 1's calls repeat every 3, rank 0's every 17" \
    "$(q "$D/i.json" '" ".join("%s %s" % (f["kind"], f["title"]) for f in d["findings"] if f["kind"] == "step-structure")')"

"$MKTRACE" --ranks 2 --steps 6 --micro 8 "$D/ok"
tap_eq "ranks alike: no step-structure finding" 0 \
    "$("$CCSHIM_AUDIT" --json "$D/ok" | python3 -c 'import json,sys; print(sum(f["kind"] == "step-structure" for f in json.load(sys.stdin)["findings"]))')"
tap_done
