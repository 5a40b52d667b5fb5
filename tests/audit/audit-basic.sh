#!/bin/sh
# audit-basic.sh - ccshim-audit's counting outputs on generated traces:
# --tsv, --tsv-records, --json, the table, deferred calls counted apart,
# and files it cannot read reported and skipped.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 28
D=$CCS_TMP

# 4 ranks, 3 steps, 2 reductions of each of the 2 buckets per step.
"$MKTRACE" --ranks 4 --steps 3 --micro 2 "$D/j1"
"$CCSHIM_AUDIT" --tsv "$D/j1" > "$D/j1.tsv"; rc=$?
tap_eq "--tsv exits 0" 0 "$rc"
tap_eq "--tsv header" "#step	rank	comm	kind	count	bytes	deferred	time_ns	backend" "$(head -1 "$D/j1.tsv")"
# step 0: bcast, allreduce, allgather; steps 1-2: allreduce, allgather; x 4 ranks
tap_eq "--tsv one line per step/rank/comm/kind" 28 "$(grep -vc '^#' "$D/j1.tsv")"
# 2 x (25 MiB + 9.7 MiB) per step
tap_eq "--tsv allreduce of step 1, rank 3" "1	3	9e3779b97f4a7c15	allreduce	4	72771174	0" \
    "$(awk -F'\t' '$1==1 && $2==3 && $4=="allreduce"' "$D/j1.tsv" | cut -f1-7)"
tap_eq "--tsv broadcast only in step 0" "0 0 0 0" \
    "$(awk -F'\t' '$4=="bcast" {printf "%s ", $1}' "$D/j1.tsv" | sed 's/ $//')"

"$CCSHIM_AUDIT" --tsv-records "$D/j1" > "$D/j1.rec"
tap_eq "--tsv-records header" "#rank	seq	comm	kind	count	dtype	op	root	fingerprint	step	flags	site	buf	where" \
    "$(head -1 "$D/j1.rec")"
# per rank: 1 broadcast + 3 x (4 + 1); markers are not calls
tap_eq "--tsv-records one line per call" 64 "$(grep -vc '^#' "$D/j1.rec")"
tap_eq "--tsv-records fields of rank 1's second call" \
    "1	2	9e3779b97f4a7c15	allreduce	6553600	float32	sum	-1	0	in_place	1	7f3a00000000" \
    "$(awk -F'\t' '$1==1 && $2==2' "$D/j1.rec" | cut -f1-8,10-13)"
tap_eq "--tsv-records fingerprint is 16 hex digits" 1 \
    "$(awk -F'\t' '$1==1 && $2==2 {print $9}' "$D/j1.rec" | grep -c '^[0-9a-f]\{16\}$')"

"$CCSHIM_AUDIT" --json "$D/j1" > "$D/j1.json"
tap_check "--json is valid JSON" python3 -m json.tool "$D/j1.json" /dev/null
tap_eq "--json schema and version" "ccshim-audit 2" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["schema"], d["version"])' "$D/j1.json")"
tap_eq "--json step 2, rank 0 calls" "allreduce:False:4:72771174 allgather:False:1:8" \
    "$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
s=[x for x in d["steps"] if x["step"]==2][0]
r=[x for x in s["ranks"] if x["rank"]==0][0]
print(" ".join("%s:%s:%d:%d" % (c["kind"], c["deferred"], c["count"], c["bytes"]) for c in r["comms"][0]["calls"]))' "$D/j1.json")"

# Coalescing ran: 3 of every 4 reductions of a bucket are deferred.
"$MKTRACE" --ranks 2 --steps 2 --micro 4 --deferred "$D/j2"
"$CCSHIM_AUDIT" --tsv "$D/j2" > "$D/j2.tsv"
tap_eq "--tsv deferred counted apart" "2 0|6 1" \
    "$(awk -F'\t' '$1==1 && $2==0 && $4=="allreduce" {printf "%s%s %s", sep, $5, $7; sep="|"}' "$D/j2.tsv")"
"$CCSHIM_AUDIT" "$D/j2" > "$D/j2.txt"
tap_eq "table has an allreduce(deferred) row per step group" 2 "$(grep -c '^    allreduce(deferred) ' "$D/j2.txt")"
"$CCSHIM_AUDIT" --json "$D/j2" > "$D/j2.json"
tap_eq "--json deferred field" "True:6 False:2" "$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
c=[x for x in d["steps"][1]["ranks"][1]["comms"][0]["calls"] if x["kind"]=="allreduce"]
print(" ".join("%s:%d" % (x["deferred"], x["count"]) for x in sorted(c, key=lambda x: not x["deferred"])))' "$D/j2.json")"
"$CCSHIM_AUDIT" --tsv-records "$D/j2" > "$D/j2.rec"
tap_eq "--tsv-records flags deferred (2 ranks x 2 steps x 3 x 2 buckets)" 24 "$(awk -F'\t' '$11 ~ /deferred/' "$D/j2.rec" | wc -l | tr -d ' ')"

# A rank that differs: flagged in the table.
"$MKTRACE" --ranks 4 --steps 3 --micro 1 --desync 1:2 "$D/j3"
"$CCSHIM_AUDIT" "$D/j3" > "$D/j3.txt"
tap_eq "table flags the differing rank (ranks, calls)" "1 3" \
    "$(awk '/^  ! allreduce / {print $3, $4}' "$D/j3.txt")"
tap_eq "table fits 100 columns" 0 "$(awk 'length > 100' "$D/j3.txt" "$D/j2.txt" | wc -l | tr -d ' ')"

# Files it cannot read: named with what is wrong; the others are read.
"$MKTRACE" --ranks 3 --steps 2 --cut 2:60 "$D/j4"
"$MKTRACE" --broken not-a-trace "$D/j4/ccshim-x-h-r7-p1.cctrace"
"$MKTRACE" --broken newer-version "$D/j4/ccshim-x-h-r8-p1.cctrace"
"$MKTRACE" --broken other-byteorder "$D/j4/ccshim-x-h-r9-p1.cctrace"
"$CCSHIM_AUDIT" --tsv "$D/j4" > "$D/j4.tsv" 2> "$D/j4.err"; rc=$?
tap_eq "unreadable files do not fail the run" 0 "$rc"
tap_check "not a trace: named and said" grep -q "r7-p1.cctrace: not a ccshim trace" "$D/j4.err"
tap_check "newer version: named and said" grep -q "r8-p1.cctrace: trace format version 4 is newer than this tool understands (3)" "$D/j4.err"
tap_check "other byte order: named and said" grep -q "r9-p1.cctrace: written with the other byte order" "$D/j4.err"
tap_check "truncated: named and said, with the records lost" \
    grep -q "r2-p1002.cctrace: truncated: the file ends inside a chunk of [0-9]* records; [0-9]* read, 1 lost" "$D/j4.err"
# The cut rank's whole records before the cut are read too.
tap_eq "good ranks and the cut one's readable records counted" "0 1 2" "$(awk -F'\t' '$1==1 && $4=="allreduce" {printf "%s%s", sep, $2; sep=" "}' "$D/j4.tsv")"
mkdir "$D/bad"
"$MKTRACE" --broken not-a-trace "$D/bad/a.cctrace"
"$CCSHIM_AUDIT" "$D/bad" > /dev/null 2>&1; rc=$?
tap_eq "exit 2 when no trace is readable" 2 "$rc"
"$CCSHIM_AUDIT" "$D/does-not-exist" > /dev/null 2> "$D/ne.err"; rc=$?
tap_eq "exit 2 for a missing directory" 2 "$rc"
tap_check "missing directory named" grep -q "does-not-exist: No such file or directory" "$D/ne.err"

# Sites described after the records that name them (the runtime's writer does
# so for a site first seen during a flush): the top sites count them all.
"$MKTRACE" --ranks 2 --steps 3 --micro 2 --late-sites "$D/late"
site_counts() { "$CCSHIM_AUDIT" --json --no-symbols "$1" | python3 -c '
import json, sys
print(" ".join("%s:%d" % (s["symbol"], s["count"]) for s in json.load(sys.stdin)["sites"]))'; }
"$MKTRACE" --ranks 2 --steps 3 --micro 2 "$D/early"
tap_eq "SITE chunks after their records: the same site counts as before them" \
    "tg_site_reducer_allreduce_bucket:24 tg_site_gather_loss:6 tg_site_broadcast_params:2 = same" \
    "$(site_counts "$D/late") = $([ "$(site_counts "$D/late")" = "$(site_counts "$D/early")" ] && echo same)"
tap_done
