#!/bin/sh
# mpi-coll.sh - the collectives beyond MPI-3's plain ones (tests/mpi-coll/
# coll.c) under CCSHIM_ON_DESYNC=abort, on 4 ranks:
#   - the legal program (neighbourhood collectives on a ring and on a grid
#     with edges, counts that differ from rank to rank; every constructor;
#     persistent and large-count calls where the MPI has them, persistent
#     ones started in different orders on different ranks): exit 0, no
#     verdict, the plain run's result lines;
#   - rank 1's neighbourhood all-to-all where the others all-gather: the
#     MISMATCH names rank 1, the kinds and seq 3 of the ring, and abort ends
#     the job;
#   - (persistent collectives) rank 1's persistent all-reduce of 8 floats
#     made where the others' are of 4: the MISMATCH names rank 1 and seq 2,
#     the seq of that init (the members match a persistent collective at
#     its init; its starts may come in any order).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
COLL="$top_builddir/tests/mpi-coll/coll"
[ -x "$COLL" ] || tap_skip_all "tests/mpi-coll/coll not built"
tap_plan 9
NP=4

# The legal program, plain and under ccshim.
d="$CCS_TMP/legal"
mkdir -p "$d"
ccs_mpirun 120 $NP "$COLL" legal > "$d/plain.out" 2> "$d/plain.err"
tap_eq "legal: the plain run exits 0" 0 $?
ccs_mpirun 120 $NP env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_ON_DESYNC=abort "$CCSHIM_RUN" --mpi -- \
    "$COLL" legal > "$d/shim.out" 2> "$d/shim.err"
tap_eq "legal: exit 0 and no verdict under abort" "0" "$?$(cat "$d"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true)"
sort "$d/plain.out" > "$d/plain.sorted"
sort "$d/shim.out" > "$d/shim.sorted"
lines=$(wc -l < "$d/plain.sorted" | tr -d ' ')
# A rank's lines: 8 of the neighbourhood collectives, 3 of the constructors
# (and create_group's on the first half); MPI-4: idup_with_info's and
# from_group's, 8 of the persistent calls, 2 of the _c ones.
have() { grep -q "^#define $1 1" "$top_builddir/config.h"; }
per=11
have HAVE_MPI_COMM_IDUP_WITH_INFO && per=$((per + 1))
have HAVE_MPI_COMM_FROM_GROUP && per=$((per + 1))
have HAVE_MPI_PERSISTENT_COLL && per=$((per + 8))
have HAVE_MPI_LARGE_COUNT && per=$((per + 2))
if [ "$lines" -eq $((NP * per + NP / 2)) ] && cmp -s "$d/plain.sorted" "$d/shim.sorted"; then
    tap_ok "legal: the plain run's $lines result lines"
else
    tap_not_ok "legal: the plain run's $lines result lines"
    diff "$d/plain.sorted" "$d/shim.sorted" | head -10 | tap_diag; head -5 "$d/shim.err" | tap_diag
fi

# A neighbourhood mismatch: seq 3 of the ring (iterations 0 and 1 are 1, 2).
dsx_run nkind 120 $NP CCSHIM_ON_DESYNC=abort SETTLE_MS=3000 -- "$COLL" nkind
tap_eq "nkind: the job's exit status is abort's, 3" 3 "$DSX_RC"
dsx_check_verdict nkind MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=3: rank 1 issued neighbor_alltoall\(count=2, float64\) where ranks 0,2-3 issued neighbor_allgather\(count=2, float64\)$"

if have HAVE_MPI_PERSISTENT_COLL; then
    dsx_run pcount 120 $NP CCSHIM_ON_DESYNC=abort SETTLE_MS=3000 -- "$COLL" pcount
    tap_eq "pcount: the job's exit status is abort's, 3" 3 "$DSX_RC"
    dsx_check_verdict pcount MISMATCH "^ccshim MISMATCH comm=0x[0-9a-f]+ size=4 seq=2: rank 1 issued allreduce\(count=8, float32, sum, nonblocking\) where ranks 0,2-3 issued allreduce\(count=4, float32, sum, nonblocking\)$"
else
    tap_skip "pcount: the job's exit status is abort's, 3" "this MPI has no persistent collectives"
    tap_skip "pcount: abort ends the job" "this MPI has no persistent collectives (MPI_Allreduce_init)"
    tap_skip "pcount: MISMATCH with the right ranks and seq" "this MPI has no persistent collectives"
fi
tap_done
