#!/bin/sh
# audit-findings.sh - ccshim-audit's findings on generated jobs: redundant
# per-mini-batch reductions (k = reductions of one buffer per step), none for
# a per-step job, ranks that disagree, desync reports, inferred steps,
# truncated traces, --expect limits, patterns and symbolised call sites.
# Coalescing advice only where it is true: floating-point sums of one buffer
# (address and size) repeated within marked steps; never every:N without
# markers, nothing for integer, MAX or tiny reductions.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 47
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
tap_eq "desync: one finding per report: the verdict (its line whole), the flight dump" \
    "desync-reports|runtime verdict: rank 2 issued allreduce (seq 2) while the others issued allgather (reported by rank 2)|desync-reports|1 flight-recorder dump (rank 2)" \
    "$(q "$D/ds.json" '"|".join(f["kind"] + "|" + f["title"] for f in d["findings"] if f["kind"] == "desync-reports")')"

"$MKTRACE" --ranks 3 --steps 6 --micro 4 --no-markers --head 2 "$D/nm"
"$CCSHIM_AUDIT" --json "$D/nm" > "$D/nm.json"
tap_eq "no markers: steps inferred (period, head)" "inferred 9 2" \
    "$(q "$D/nm.json" 'd["steps_source"], d["inference"]["period"], d["inference"]["head"]')"
tap_eq "no markers: 6 steps, k = 4" "6 4" \
    "$(q "$D/nm.json" 'len(d["steps"]), [f["k"] for f in d["findings"] if f["kind"]=="redundant-reduction"][0]')"
"$CCSHIM_AUDIT" "$D/nm" > "$D/nm.txt"
tap_check "no markers: the table says so" grep -q "^steps: INFERRED (no step markers)" "$D/nm.txt"
# Without markers the "step" is a period of the call stream: a solver that
# reduces one buffer twice per iteration looks the same.  No coalescing advice.
rf() { q "$1" '"|".join("%s %s %s" % (f["severity"], f["k"], f["title"]) for f in d["findings"] if f["kind"]=="redundant-reduction")'; }
ra() { q "$1" '"|".join(f["action"] for f in d["findings"] if f["kind"]=="redundant-reduction")'; }
tap_eq "no markers: the finding is info, per inferred step" \
    "info 4 allreduce reduces the same buffer 4 times per inferred step (no step markers) (comm 9e3779b97f4a7c15)" "$(rf "$D/nm.json")"
tap_eq "no markers: no CCSHIM_COALESCE advice at all (neither every:N nor auto)" "0" "$(ra "$D/nm.json" | grep -c 'CCSHIM_COALESCE\|every:')"
ra "$D/nm.json" > "$D/nm.action"
tap_check "no markers: says to add step markers or use ccshim-run --torch, and that coalescing needs them" sh -c \
    "grep -q 'do not coalesce on this evidence' '$D/nm.action' && grep -q 'ccshim_step_mark()' '$D/nm.action' && grep -q 'ccshim-run --torch' '$D/nm.action' && grep -q 'coalescing needs the markers' '$D/nm.action'"
# One unmarked step: no period either, the whole run is one step.
"$MKTRACE" --ranks 2 --steps 1 --micro 8 --no-markers "$D/nm1"
"$CCSHIM_AUDIT" --json "$D/nm1" > "$D/nm1.json"
tap_eq "no markers, no period: steps none, one info finding 'in the run', no every:N" \
    "none|info 8 allreduce reduces the same buffer 8 times in the run (no step markers) (comm 9e3779b97f4a7c15)|0" \
    "$(q "$D/nm1.json" 'd["steps_source"]')|$(rf "$D/nm1.json")|$(ra "$D/nm1.json" | grep -c 'every:')"

# Same address, different sizes: a 2 MiB call once per step at the address of
# a 1.5 MiB bucket reduced 8 times is a different buffer (8, not 9).
"$MKTRACE" --ranks 2 --steps 3 --micro 8 --buckets 1.5M --alias 2M "$D/al"
"$CCSHIM_AUDIT" --json "$D/al" > "$D/al.json"
tap_eq "same address, two sizes: k = 8 (not 9), every:8" "warning 8 allreduce reduces the same buffer 8 times per step (comm 9e3779b97f4a7c15)|1" \
    "$(rf "$D/al.json")|$(ra "$D/al.json" | grep -c 'CCSHIM_COALESCE=every:8,')"
tap_eq "same address, two sizes: the evidence names the 1.5 MiB buffer" 1 \
    "$(q "$D/al.json" 'd["findings"][0]["evidence"]' | grep -c 'one 1.5 MiB buffer (393216 float32, sum) 8 times')"
tap_eq "same address, two sizes: 1 buffer reduced repeatedly in step 1" 1 \
    "$(q "$D/al.json" 'd["steps"][1]["comms"][0]["buffers_reduced_repeatedly"]')"
"$CCSHIM_AUDIT" --expect 'allreduce<=8/buffer' "$D/al" > /dev/null; rc=$?
tap_eq "same address, two sizes: --expect allreduce<=8/buffer holds" 0 "$rc"

# Only floating-point sums are coalesced: integer, MAX and tiny reductions
# repeated within marked steps get no advice.
for v in "int32:--dtype int32" "int64 sum:--dtype int64 --op sum" "float32 max:--op max" "float32 min:--op min" \
    "512-byte float32:--buckets 512"; do
    name=${v%%:*}; args=${v#*:}
    # shellcheck disable=SC2086
    "$MKTRACE" --ranks 2 --steps 3 --micro 8 $args "$D/nc"
    tap_eq "$name reductions 8 times per marked step: no finding" "0" \
        "$("$CCSHIM_AUDIT" --json "$D/nc" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["findings"]))')"
    rm -rf "$D/nc"
done
# Marked steps, k repeats, other float types and AVG: advice naming k.
"$MKTRACE" --ranks 2 --steps 4 --micro 5 --dtype float64 --op avg "$D/f64"
"$CCSHIM_AUDIT" --json "$D/f64" > "$D/f64.json"
tap_eq "float64 AVG 5 times per marked step: advice names k = 5" \
    "warning 5 allreduce reduces the same buffer 5 times per step (comm 9e3779b97f4a7c15)|1" \
    "$(rf "$D/f64.json")|$(ra "$D/f64.json" | grep -c 'CCSHIM_COALESCE=auto (or CCSHIM_COALESCE=every:5, as every step and rank makes 5)')"
"$MKTRACE" --ranks 2 --steps 3 --micro 3 --dtype bfloat16 "$D/bf"
# DDP's bucket rebuild in step 0: the first mini-batch reduces the old
# buffers, the 7 others the new ones, then 8 per step: auto, no every:N.
"$MKTRACE" --ranks 2 --steps 3 --micro 8 --rebuild "$D/rb"
"$CCSHIM_AUDIT" --json "$D/rb" > "$D/rb.json"
tap_eq "bucket rebuild in step 0: k 7 to 8, step 0's evidence says 7" \
    "warning 8 allreduce reduces the same buffer 7 to 8 times per step (comm 9e3779b97f4a7c15)|1" \
    "$(rf "$D/rb.json")|$(q "$D/rb.json" 'd["findings"][0]["evidence"]' | grep -c '^step 0: rank 0 reduced one 25.0 MiB buffer (6553600 float32, sum) 7 times')"
tap_eq "bucket rebuild in step 0: CCSHIM_COALESCE=auto, no every:N" "1 0" \
    "$(ra "$D/rb.json" | grep -c 'Run with CCSHIM_COALESCE=auto, .*no every:N fits') $(ra "$D/rb.json" | grep -c 'every:[0-9]')"
tap_eq "bfloat16 SUM 3 times per marked step: k = 3" "warning 3 allreduce reduces the same buffer 3 times per step (comm 9e3779b97f4a7c15)" \
    "$("$CCSHIM_AUDIT" --json "$D/bf" > "$D/bf.json"; rf "$D/bf.json")"

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

if grep -q '^#define HAVE_ELFUTILS_LIBDWFL_H 1' "$top_builddir/config.h"; then
    tap_eq "top site named from the debug information (function at file:line)" 1 \
        "$(q "$D/mb32.json" 'd["sites"][0]["resolved"]' | grep -c '^tg_site_reducer_allreduce_bucket at .*tracegen\.c:[0-9][0-9]*$')"
else
    tap_skip "top site named from the debug information" "built without libdw (elfutils)"
fi
# A hung job, killed (mktrace --hang 2: ranks 0, 1 and 3 end in a bucket
# reduction rank 2 never makes, an INFLIGHT chunk; every rank's END says
# signal 15): the post-mortem names the culprit and the call.
"$MKTRACE" --ranks 4 --steps 2 --hang 2 "$D/hg"
"$CCSHIM_AUDIT" "$D/hg" > "$D/hg.txt"
"$CCSHIM_AUDIT" --json "$D/hg" > "$D/hg.json"
tap_eq "hang: the ranks listed as killed, none complete" \
    "ccshim-audit: 4 traces (0 complete, 4 killed by signal 15, 0 cut short, 0 unreadable), job 4242 on node1 ..." \
    "$(head -1 "$D/hg.txt")"
tap_eq "hang: one finding, the post-mortem, naming the culprit and the call" \
    "post-mortem|error|rank 2 left out allreduce at tracegen.c:22; ranks 0-1,3 blocked in it|[2]|8" \
    "$(q "$D/hg.json" '"|".join([d["findings"][0]["kind"], d["findings"][0]["severity"], d["findings"][0]["title"], str(d["findings"][0]["ranks"]), str(d["findings"][0]["first_seq"])]) if len(d["findings"]) == 1 else d["findings"]')"
tap_eq "hang: what each rank was doing" \
    "comm 9e3779b97f4a7c15 (4 ranks), seq 8, the first that not every rank reached; ranks 0-1,3: blocked in allreduce at tracegen.c:22 since 00:00:00.000 UTC for 2.0 s; killed by signal 15; rank 2: not in a collective; killed by signal 15" \
    "$(q "$D/hg.json" 'd["findings"][0]["evidence"]')"
tap_eq "hang: the calls in progress counted, flagged in_progress, all wait" "3 3 6000000000" \
    "$("$CCSHIM_AUDIT" --tsv-records "$D/hg" | awk -F'\t' '$11 ~ /(^|,)in_progress$/' | wc -l | tr -d ' ') $(q "$D/hg.json" 'sum(c["count"] for s in d["steps"] if s["step"] == 2 for r in s["ranks"] for cm in r["comms"] for c in cm["calls"])') $(q "$D/hg.json" 'sum(r["wait_ns"] for s in d["time"]["steps"] if s["step"] == 2 for r in s["ranks"])')"
tap_done
