#!/bin/sh
# audit-comms.sh - what ccshim-audit says about communicators, on a real
# 2-rank MPI run of tests/audit/comms.c: a freed duplicate's comm_free closes
# its call pattern (its record has no sequence number, it came last); a
# Cartesian communicator is seen created (comm_cart); one made by a call
# ccshim does not intercept (the MPI library's own PMPI_Comm_dup, looked up
# in it) is "not seen created", not a rank that skipped calls; point-to-point calls
# that differ by rank by design mark no row as differing, so the rows agree
# with "findings (0)" below them.  The same on synthetic traces: the rows
# marked ! are exactly the rank-mismatch finding's.
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 9
D=$CCS_TMP

# A rank that makes one all-reduce more in step 1: its row, and only its, is marked.
"$MKTRACE" --ranks 3 --steps 3 --desync 2:1 "$D/ds"
"$CCSHIM_AUDIT" "$D/ds" > "$D/ds.txt"
tap_eq "synthetic desync: one row marked ! (rank 2, step 1: 3 all-reduces), one rank-mismatch finding" "1 1" \
    "$(grep -c '^  ! allreduce  *2  ' "$D/ds.txt") $(grep -c '^  [0-9]*\. \[error\] rank 2 disagrees with the others' "$D/ds.txt")"

if ! ccs_have_mpi || [ -z "${MPICC:-}" ] || ! command -v "$MPICC" > /dev/null 2>&1; then
    for t in "comms.c built and run on 2 ranks" "comm_free closes the duplicate's pattern" \
        "a communicator made behind ccshim's back: not seen created, twice (one id per rank)" \
        "--json: created_by null for them, comm_dup for the duplicate, comm_cart for the Cartesian one" \
        "no row marked ! and no 'made none' line" "findings (0) and the all-clear, consistent with the rows" \
        "the send and receive rows are there, unmarked" \
        "a bit flipped in a real trace's header rank: damaged, both ranks named"; do
        tap_skip "$t" "MPI or its compiler (MPICC) not available"
    done
    tap_done
    exit $?
fi
"$MPICC" -O2 -g -o "$D/comms" "$top_srcdir/tests/audit/comms.c" &&
    ccs_mpirun 60 2 "$CCSHIM_RUN" --trace-dir "$D/t" -- "$D/comms" > "$D/run.out" 2>&1
tap_eq "comms.c built and run on 2 ranks" 0 $?
"$CCSHIM_AUDIT" "$D/t" > "$D/t.txt" 2> "$D/t.err"
"$CCSHIM_AUDIT" --json "$D/t" > "$D/t.json" 2> /dev/null
tap_eq "comm_free closes the duplicate's pattern" \
    "    pattern (rank 0): allreduce 64 B @buf0 x2, comm_free 0 B" "$(grep '^    pattern (rank 0): allreduce 64 B' "$D/t.txt")"
tap_eq "a communicator made behind ccshim's back: not seen created, twice (one id per rank)" 2 \
    "$(grep -c '^  comm [0-9a-f]\{16\} (mpi, 2 ranks, not seen created: one rank.s calls, under its own id)$' "$D/t.txt")"
tap_eq "--json: created_by null for them, comm_dup for the duplicate, comm_cart for the Cartesian one" "2 1 1" \
    "$(json_q "$D/t.json" 'sum(1 for c in d["comms"] if c["created_by"] is None)') $(json_q "$D/t.json" 'sum(1 for c in d["comms"] if c["created_by"] == "comm_dup")') $(json_q "$D/t.json" 'sum(1 for c in d["comms"] if c["created_by"] == "comm_cart")')"
tap_eq "no row marked ! and no 'made none' line" 0 "$(grep -c '^  !' "$D/t.txt")"
tap_eq "findings (0) and the all-clear, consistent with the rows" "1 1" \
    "$(grep -c '^findings (0)$' "$D/t.txt") $(grep -c '^  none: every rank made the same calls' "$D/t.txt")"
tap_eq "the send and receive rows are there, unmarked" "1 1" \
    "$(grep -c '^    send  *0  *1 ' "$D/t.txt") $(grep -c '^    recv  *1  *1 ' "$D/t.txt")"
# Damage in a real trace: the header's rank (byte 24) no longer matches the
# META chunk's rank=, which the writer sets alike.
cp -r "$D/t" "$D/hdr"
python3 -c '
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[24] ^= 0x02
open(p, "wb").write(b)' "$(ls "$D"/hdr/*-r1-*.cctrace)"
"$CCSHIM_AUDIT" --json "$D/hdr" > "$D/hdr.json" 2> "$D/hdr.err"
tap_eq "a bit flipped in a real trace's header rank: damaged, both ranks named" "damaged 1" \
    "$(json_q "$D/hdr.json" '[f["status"] for f in d["files"] if f["rank"] == 3][0]') $(grep -c 'damaged: the header says rank 3, the META chunk rank 1 (the file is sorted and counted as rank 3); every other record was read' "$D/hdr.err")"
tap_done
