#!/bin/sh
# audit-findings.sh - ccshim-audit's findings on generated jobs: redundant
# per-mini-batch reductions (k = reductions of one buffer per step), none for
# a per-step job, ranks that disagree, desync reports, inferred steps,
# truncated traces, --expect limits, patterns and symbolised call sites.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 26
D=$CCS_TMP

# jq-like field extraction with python3: q FILE EXPR (EXPR uses d)
q() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

"$MKTRACE" --ranks 4 --steps 3 --micro 32 "$D/mb32"
"$CCSHIM_AUDIT" --json "$D/mb32" > "$D/mb32.json"
tap_eq "per-mini-batch (32): one finding, redundant" "redundant-reduction" \
    "$(q "$D/mb32.json" '" ".join(f["kind"] for f in d["findings"])')"
tap_eq "per-mini-batch (32): k = 32" 32 "$(q "$D/mb32.json" 'd["findings"][0]["k"]')"
tap_eq "per-mini-batch (32): suggests every:32 and no_sync()" "True True" \
    "$(q "$D/mb32.json" '"CCSHIM_COALESCE=every:32" in d["findings"][0]["action"], "no_sync()" in d["findings"][0]["action"]')"
tap_eq "per-mini-batch (32): pattern of step 1" "[allreduce 25.0 MiB @buf0, allreduce 9.7 MiB @buf1] x32, allgather 8 B" \
    "$(q "$D/mb32.json" 'd["steps"][1]["comms"][0]["pattern"]')"
tap_eq "per-mini-batch (32): 2 buffers reduced repeatedly" 2 \
    "$(q "$D/mb32.json" 'd["steps"][1]["comms"][0]["buffers_reduced_repeatedly"]')"

"$MKTRACE" --ranks 2 --steps 4 --micro 8 --buckets 4M,4M,1M "$D/mb8"
tap_eq "per-mini-batch (8, 3 buckets): k = 8" "redundant-reduction 8" \
    "$("$CCSHIM_AUDIT" --json "$D/mb8" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s %d" % (f["kind"], f["k"]) for f in d["findings"]))')"

"$MKTRACE" --ranks 4 --steps 3 --micro 1 "$D/ps"
"$CCSHIM_AUDIT" --json "$D/ps" > "$D/ps.json"
tap_eq "per-step: no findings" 0 "$(q "$D/ps.json" 'len(d["findings"])')"
"$CCSHIM_AUDIT" "$D/ps" > "$D/ps.txt"
tap_check "per-step: the table says none" grep -q "^  none: every rank made the same calls" "$D/ps.txt"

"$MKTRACE" --ranks 4 --steps 4 --micro 2 --desync 2:1 --reports "$D/ds"
"$CCSHIM_AUDIT" --json "$D/ds" > "$D/ds.json"
tap_eq "desync: rank-mismatch names rank 2 from step 1" "[2] 1" \
    "$(q "$D/ds.json" '[(f["ranks"], f["step_first"]) for f in d["findings"] if f["kind"]=="rank-mismatch"][0][0], [f["step_first"] for f in d["findings"] if f["kind"]=="rank-mismatch"][0]')"
# 1 broadcast + step 0 (2 x 2 + 1 all-gather) + 4 reductions of step 1: the extra call is seq 11
tap_eq "desync: first differing sequence number" 11 \
    "$(q "$D/ds.json" '[f["first_seq"] for f in d["findings"] if f["kind"]=="rank-mismatch"][0]')"
tap_eq "desync: step 1 lists the differing rank" "[2]" "$(q "$D/ds.json" 'd["steps"][1]["comms"][0]["differing_ranks"]')"
tap_eq "desync: step 0 has none" "[]" "$(q "$D/ds.json" 'd["steps"][0]["comms"][0]["differing_ranks"]')"
tap_eq "desync: reports listed" "desync flight" "$(q "$D/ds.json" '" ".join(sorted(r["type"] for r in d["reports"]))')"
tap_check "desync: reports summarised in a finding" \
    grep -q '1 desync report and 1 flight-recorder dump found' "$D/ds.json"

"$MKTRACE" --ranks 3 --steps 6 --micro 4 --no-markers --head 2 "$D/nm"
"$CCSHIM_AUDIT" --json "$D/nm" > "$D/nm.json"
tap_eq "no markers: steps inferred (period, head)" "inferred 9 2" \
    "$(q "$D/nm.json" 'd["steps_source"], d["inference"]["period"], d["inference"]["head"]')"
tap_eq "no markers: 6 steps, k = 4" "6 4" \
    "$(q "$D/nm.json" 'len(d["steps"]), [f["k"] for f in d["findings"] if f["kind"]=="redundant-reduction"][0]')"
"$CCSHIM_AUDIT" "$D/nm" > "$D/nm.txt"
tap_check "no markers: the table says so" grep -q "^steps: INFERRED (no step markers)" "$D/nm.txt"

"$MKTRACE" --ranks 3 --steps 5 --micro 1 --no-end 1 "$D/cr"
"$CCSHIM_AUDIT" --json "$D/cr" > "$D/cr.json" 2> "$D/cr.err"
tap_eq "crashed rank: truncated-trace finding for rank 1" "[1]" \
    "$(q "$D/cr.json" '[f["ranks"] for f in d["findings"] if f["kind"]=="truncated-trace"][0]')"
tap_check "crashed rank: said on stderr" grep -q "r1-p1001.cctrace: truncated: no END chunk" "$D/cr.err"

"$CCSHIM_AUDIT" --expect 'allreduce<=2' "$D/ps" > /dev/null; rc=$?
tap_eq "--expect allreduce<=2 passes per-step" 0 "$rc"
"$CCSHIM_AUDIT" --expect 'allreduce<=2' "$D/mb32" > /dev/null 2> "$D/ex.err"; rc=$?
tap_eq "--expect allreduce<=2 fails per-mini-batch" 1 "$rc"
tap_check "--expect failure said" grep -q "1 --expect rule exceeded" "$D/ex.err"
"$CCSHIM_AUDIT" --expect 'allreduce<=64' --expect 'allreduce<=32/buffer' "$D/mb32" > /dev/null; rc=$?
tap_eq "--expect at the exact counts passes (64 per comm, 32 per buffer)" 0 "$rc"
"$CCSHIM_AUDIT" --json --expect 'allreduce<=31/buffer' "$D/mb32" > "$D/ex.json"; rc=$?
tap_eq "--expect /buffer one below fails, worst 32" "1 32" "$rc $(q "$D/ex.json" 'd["expect"][0]["worst"]')"
"$CCSHIM_AUDIT" --expect 'allreduce<=1000' --expect 'bogus<=1' "$D/ps" > /dev/null 2>&1; rc=$?
tap_eq "--expect with an unknown kind is a usage error" 2 "$rc"

if command -v addr2line > /dev/null 2>&1; then
    tap_eq "top site symbolised with addr2line (function at file:line)" 1 \
        "$(q "$D/mb32.json" 'd["sites"][0]["resolved"]' | grep -c '^tg_site_reducer_allreduce_bucket at .*tracegen\.c:[0-9][0-9]*$')"
else
    tap_skip "top site symbolised with addr2line" "addr2line not installed"
fi
tap_done
