#!/bin/sh
# audit-allclear.sh - ccshim-audit gives no false all-clear: a run with no
# collective (or ranks without one) is a finding; two jobs' traces in one
# directory are refused, naming both (--job ID reads one); a damaged file
# (one byte altered) is said to be damaged, not cut short by a dying process;
# --fail-on error|warn sets exit status 3; a run where coalescing already
# ran is not advised to turn it on; two runs under one job id (each rank
# twice) are a finding.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 24
D=$CCS_TMP

# --- no collective recorded
"$MKTRACE" --ranks 2 --steps 2 --silent all "$D/none"
"$CCSHIM_AUDIT" "$D/none" > "$D/none.txt"; rc=$?
tap_eq "no collective in the run: exit 0 without --fail-on, an error finding, no all-clear" \
    "0 1 0" "$rc $(grep -c '^  1\. \[error\] no collective was recorded: 2 traces read, none with a collective$' "$D/none.txt") $(grep -c 'every rank made the same calls' "$D/none.txt")"
"$CCSHIM_AUDIT" --json "$D/none" > "$D/none.json"
tap_eq "--json: kind no-collectives, severity error, ranks 0 and 1" "no-collectives error [0, 1]" \
    "$(json_q "$D/none.json" '" ".join([d["findings"][0]["kind"], d["findings"][0]["severity"], str(d["findings"][0]["ranks"])])')"
"$CCSHIM_AUDIT" --fail-on error "$D/none" > /dev/null 2> "$D/none.err"; rc=$?
tap_eq "--fail-on error: exit 3, said" "3 1" \
    "$rc $(grep -c '^ccshim-audit: 1 finding of severity error or worse (--fail-on)$' "$D/none.err")"
"$MKTRACE" --ranks 3 --steps 2 --silent 1 "$D/some"
"$CCSHIM_AUDIT" "$D/some" > "$D/some.txt"
tap_eq "one rank without a collective: a warning naming it, no all-clear" "1 0" \
    "$(grep -c '^  1\. \[warning\] rank 1 recorded no collective, while rank 0 recorded 7$' "$D/some.txt") $(grep -c 'every rank made the same calls' "$D/some.txt")"
"$CCSHIM_AUDIT" --fail-on error "$D/some" > /dev/null 2>&1; e=$?
"$CCSHIM_AUDIT" --fail-on warn "$D/some" > /dev/null 2>&1; w=$?
tap_eq "--fail-on error passes a warning (0), --fail-on warn fails it (3)" "0 3" "$e $w"
"$MKTRACE" --ranks 2 --steps 2 "$D/fine"
"$CCSHIM_AUDIT" --fail-on warn "$D/fine" > "$D/fine.txt"; rc=$?
tap_eq "a clean run: --fail-on warn exits 0, the all-clear printed" "0 1" \
    "$rc $(grep -c '^  none: every rank made the same calls' "$D/fine.txt")"
"$CCSHIM_AUDIT" --fail-on warn --tsv-records "$D/some" > /dev/null 2>&1; rc=$?
tap_eq "--fail-on with --tsv-records alone still evaluates the findings (exit 3)" 3 "$rc"
"$CCSHIM_AUDIT" --fail-on sometimes "$D/fine" > /dev/null 2> "$D/bad.err"; rc=$?
tap_eq "--fail-on with a bad value: exit 2, names it" "2 1" \
    "$rc $(grep -c '^ccshim-audit: --fail-on sometimes: expected error or warn$' "$D/bad.err")"

# --- two jobs in one directory
"$MKTRACE" --ranks 2 --steps 2 --job 4242 "$D/two"
"$MKTRACE" --ranks 2 --steps 2 --job 5151 --reports "$D/two"
"$CCSHIM_AUDIT" "$D/two" > "$D/two.txt" 2> "$D/two.err"; rc=$?
tap_eq "two jobs: refused (exit 2) with both ids, nothing printed" "2 1 0" \
    "$rc $(grep -c 'the traces are of 2 different jobs, which must not be counted together: 4242 (2 traces), 5151 (2 traces); choose one with --job ID' "$D/two.err") $(wc -c < "$D/two.txt" | tr -d ' ')"
"$CCSHIM_AUDIT" --job 4242 --tsv "$D/two" > "$D/j4242.tsv" 2> /dev/null; rc=$?
"$CCSHIM_AUDIT" --tsv "$D/fine" > "$D/fine.tsv"
tap_eq "--job 4242: exit 0, the counts of one job (as audited alone)" "0 same" \
    "$rc $(cmp -s "$D/j4242.tsv" "$D/fine.tsv" && echo same)"
"$CCSHIM_AUDIT" --job 5151 --json "$D/two" > "$D/j5151.json" 2> /dev/null
tap_eq "--job 5151: its 2 traces and its 2 reports" "2 2 5151" \
    "$(json_q "$D/j5151.json" 'len(d["files"])') $(json_q "$D/j5151.json" 'len(d["reports"])') $(json_q "$D/j5151.json" '",".join(sorted(set(f["job"] for f in d["files"])))')"
"$CCSHIM_AUDIT" --job 4242 --json "$D/two" > "$D/j4242.json" 2> /dev/null
tap_eq "--job 4242: the other job's reports left out" 0 "$(json_q "$D/j4242.json" 'len(d["reports"])')"
"$CCSHIM_AUDIT" --job 99 "$D/two" > /dev/null 2> "$D/j99.err"; rc=$?
tap_eq "--job of no trace here: exit 2, lists the jobs" "2 1" \
    "$rc $(grep -c '^ccshim-audit: --job 99: no trace of that job here (jobs: 4242 (2 traces), 5151 (2 traces))$' "$D/j99.err")"

# ... and two runs under one job id (two hosts' names, the same ranks): not two jobs, but
# each rank twice, counted together
"$MKTRACE" --ranks 2 --steps 2 --host nodeA "$D/dup"
"$MKTRACE" --ranks 2 --steps 2 --host nodeB "$D/dup"
"$CCSHIM_AUDIT" "$D/dup" > "$D/dup.txt" 2>&1
tap_eq "one job id, each rank twice: an error finding, no all-clear" "1 0" \
    "$(grep -c '^  1\. \[error\] ranks 0-1 of job 4242 have more than one trace: their calls are counted together$' "$D/dup.txt") $(grep -c 'every rank made the same calls' "$D/dup.txt")"

# --- damage: one byte altered in rank 1's trace of a 2-rank job
"$MKTRACE" --ranks 2 --steps 3 "$D/orig"
# byte_at WHAT: the offset of a byte of rank 1's file (the first RECORDS
# chunk's length, a record's kind, a record's communicator)
byte_at() {
    python3 - "$1" "$D/orig"/ccshim-4242-node1-r1-p1001.cctrace << 'EOF'
import struct, sys
what, path = sys.argv[1], sys.argv[2]
b = open(path, "rb").read()
off = struct.unpack_from("<I", b, 16)[0]             # header_size
while off < len(b):
    t, l = struct.unpack_from("<II", b, off)
    if t == 5:                                       # RECORDS
        rec = off + 8
        print({"length": off + 5, "kind": rec + 76, "comm": rec + 96 + 8 + 3}[what])
        break
    off += 8 + l
EOF
}
damage() { # damage NAME OFFSET XOR|=VALUE: a copy of the job with one byte changed
    rm -rf "$D/$1"; cp -r "$D/orig" "$D/$1"
    python3 -c '
import sys
p, off, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
b = bytearray(open(p, "rb").read())
b[off] = int(how[1:], 0) if how[0] == "=" else b[off] ^ int(how, 0)
open(p, "wb").write(b)' "$D/$1"/ccshim-4242-node1-r1-p1001.cctrace "$2" "$3"
}
damage len "$(byte_at length)" 0x80
# (where the chunk is depends on the META chunk, which names mktrace's path)
LEN_AT=$(($(byte_at length) - 5))
LEN_SIZE=$(wc -c < "$D/len/ccshim-4242-node1-r1-p1001.cctrace" | tr -d ' ')
LEN_CLAIMS=$(python3 -c 'import struct,sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(), int(sys.argv[2]) + 4)[0])' \
    "$D/len/ccshim-4242-node1-r1-p1001.cctrace" "$LEN_AT")
"$CCSHIM_AUDIT" --json "$D/len" > "$D/len.json" 2> "$D/len.err"
tap_eq "a RECORDS chunk's length flipped past the end: damaged, not truncated" "damaged 0 1" \
    "$(json_q "$D/len.json" '[f["status"] for f in d["files"] if f["rank"] == 1][0]') $(grep -c 'truncated' "$D/len.err") $(grep -c "damaged: the chunk at byte $LEN_AT (type 5) claims $LEN_CLAIMS bytes, past the end of the file ($LEN_SIZE bytes), yet the file ends with a whole END chunk" "$D/len.err")"
tap_eq "... its finding says so and does not say the process died" "1 0" \
    "$(json_q "$D/len.json" 'sum(1 for f in d["findings"] if f["kind"] == "unreadable-trace" and f["title"].startswith("damaged trace"))') $(json_q "$D/len.json" 'sum(1 for f in d["findings"] if "died" in f["action"])')"
"$MKTRACE" --ranks 2 --steps 3 --micro 2 --cut 1:100 "$D/cut"
"$CCSHIM_AUDIT" --json "$D/cut" > "$D/cut.json" 2> /dev/null
tap_eq "a file really cut short is still truncated" truncated \
    "$(json_q "$D/cut.json" '[f["status"] for f in d["files"] if f["rank"] == 1][0]')"
damage kind "$(byte_at kind)" =0x41
"$CCSHIM_AUDIT" --json "$D/kind" > "$D/kind.json" 2> "$D/kind.err"
tap_eq "a record's kind altered (65, no such kind): damaged, that record left out (9 of 10 calls)" "damaged 9 1" \
    "$(json_q "$D/kind.json" '[str(f["status"]) + " " + str(f["records"]) for f in d["files"] if f["rank"] == 1][0]') $(grep -c 'damaged: 1 record holds a value no writer makes, left out (the first: record 1: kind 65, unknown to this ccshim-audit: damage, or a newer ccshim); every other record was read' "$D/kind.err")"
damage comm "$(byte_at comm)" 0x10
"$CCSHIM_AUDIT" --json "$D/comm" > "$D/comm.json" 2> "$D/comm.err"
tap_eq "a record's communicator altered: damaged (named, never described)" "damaged 1" \
    "$(json_q "$D/comm.json" '[f["status"] for f in d["files"] if f["rank"] == 1][0]') $(grep -c 'damaged: 1 id named by records but never described (the first: record 2: communicator 9e3779b96f4a7c15, which no chunk of the file describes)' "$D/comm.err")"
tap_eq "... and the rank mismatch it causes says the trace is damaged" 1 \
    "$(json_q "$D/comm.json" 'sum(1 for f in d["findings"] if f["kind"] == "rank-mismatch" and "rank 1'"'"'s trace is damaged" in f["evidence"])')"
"$CCSHIM_AUDIT" --fail-on warn "$D/orig" > /dev/null 2>&1; o=$?
"$CCSHIM_AUDIT" --fail-on warn "$D/kind" > /dev/null 2>&1; k=$?
tap_eq "--fail-on warn: the job passes (0), its damaged copy fails (3)" "0 3" "$o $k"

# --- coalescing already on: CCSHIM_COALESCE=auto's first step reduces every mini-batch
"$MKTRACE" --ranks 2 --steps 3 --micro 4 --deferred-from 1 "$D/auto"
"$CCSHIM_AUDIT" --json "$D/auto" > "$D/auto.json"
tap_eq "coalescing on: the repeats of step 0 are info, titled so" \
    "info coalescing is on, yet allreduce reduced the same buffer 4 times per step in step 0 (comm 9e3779b97f4a7c15)" \
    "$(json_q "$D/auto.json" '[f["severity"] + " " + f["title"] for f in d["findings"] if f["kind"] == "redundant-reduction"][0]')"
tap_eq "... and never advised to turn coalescing on" 0 \
    "$(json_q "$D/auto.json" 'sum(1 for f in d["findings"] if "Run with CCSHIM_COALESCE" in f["action"])')"
"$MKTRACE" --ranks 2 --steps 3 --micro 4 "$D/off"
tap_eq "coalescing off: the same repeats still get the advice (a warning)" "warning 1" \
    "$("$CCSHIM_AUDIT" --json "$D/off" > "$D/off.json"; json_q "$D/off.json" '[f["severity"] + " " + str(int("Run with CCSHIM_COALESCE=auto" in f["action"])) for f in d["findings"] if f["kind"] == "redundant-reduction"][0]')"
tap_done
