#!/bin/sh
# mpi-every-call.sh - every MPI function ccshim records (tests/integration/
# mpi_every_call.c: each generated wrapper of CCS_MPI_GENERATED, blocking and
# nonblocking, with and without MPI_IN_PLACE, and MPI_(I)allreduce; the
# neighbourhood collectives on each kind of topology; each communicator
# constructor; and where the MPI has them, MPI-4's persistent collectives,
# a record at each init and each start, and the large-count _c variants), on 3 ranks: each
# rank's trace holds exactly the records the program says the matching
# rules give (kind, flags, root or peer, count, datatype, op, bytes), in
# call order, and names every communicator it made with its size; every
# collective's fingerprint is the same on every member.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
prog="$top_builddir/tests/integration/mpi_every_call"
DUMP="$top_builddir/tests/ccs_trace_dump"
[ -x "$prog" ] || tap_skip_all "mpi_every_call not built"
[ -x "$DUMP" ] || tap_skip_all "ccs_trace_dump not built"
NP=3
tap_plan $((2 * NP + 5))
# The MPI-4 functions this build wraps (configure's probes).
have() { grep -q "^#define $1 1" "$top_builddir/config.h"; }

tr="$CCS_TMP/trace"
ccs_mpirun 60 $NP "$CCSHIM_RUN" --mpi --summary 0 --trace-dir "$tr" -- "$prog" "$CCS_TMP" > "$CCS_TMP/out" 2> "$CCS_TMP/err"
tap_eq "runs under ccshim-run" 0 $?
tap_eq "one trace per rank" $NP "$(ls "$tr"/*.cctrace 2>/dev/null | wc -l)"
"$DUMP" "$tr"/*.cctrace > "$CCS_TMP/dump" 2> "$CCS_TMP/dump.err"
# R trace_rank comm seq kind step flags group_depth root count dtype op fingerprint backend bytes
r=0
while [ $r -lt $NP ]; do
    cp "$CCS_TMP/expect.$r" "$CCS_TMP/want.$r" 2>/dev/null || : > "$CCS_TMP/want.$r"
    awk -F'\t' -v r=$r '$1 == "R" && $2 == r && $14 == "mpi" && $5 !~ /^comm_/ && $5 != "step" {
        print $5, $7, $9, $10, $11, $12, $15}' "$CCS_TMP/dump" > "$CCS_TMP/got.$r"
    # 34 collectives and a sendrecv; ranks 0 and 1 also send and receive
    # twice.  10 neighbourhood collectives, a barrier on the communicators
    # of MPI_Comm_dup_with_info and MPI_Intercomm_merge, and on ranks 0 and
    # 1 on MPI_Comm_create_group's.  MPI-4: a barrier on the communicators
    # of MPI_Comm_idup_with_info and of each from-group constructor; 24
    # inits of persistent collectives and their 28 starts; 42 _c calls and
    # 21 _c inits with a start each.
    n=47; [ $r -lt 2 ] && n=50
    have HAVE_MPI_COMM_IDUP_WITH_INFO && n=$((n + 1))
    have HAVE_MPI_COMM_FROM_GROUP && n=$((n + 2))
    have HAVE_MPI_PERSISTENT_COLL && n=$((n + 52))
    have HAVE_MPI_LARGE_COUNT && n=$((n + 42))
    have HAVE_MPI_PERSISTENT_COLL && have HAVE_MPI_LARGE_COUNT && n=$((n + 42))
    if [ "$(wc -l < "$CCS_TMP/want.$r")" -eq $n ] && cmp -s "$CCS_TMP/want.$r" "$CCS_TMP/got.$r"; then
        tap_ok "rank $r: the $n records the rules give, in call order"
    else
        tap_not_ok "rank $r: the $n records the rules give, in call order"
        diff "$CCS_TMP/want.$r" "$CCS_TMP/got.$r" | head -20 | tap_diag
        head -5 "$CCS_TMP/err" "$CCS_TMP/dump.err" | tap_diag
    fi
    # C trace_rank id parent rank size how color backend
    sort "$CCS_TMP/comms.$r" > "$CCS_TMP/wantc.$r" 2>/dev/null
    awk -F'\t' -v r=$r '$1 == "C" && $2 == r && $9 == "mpi" {print $7, $6}' "$CCS_TMP/dump" | sort > "$CCS_TMP/gotc.$r"
    if [ -s "$CCS_TMP/wantc.$r" ] && cmp -s "$CCS_TMP/wantc.$r" "$CCS_TMP/gotc.$r"; then
        tap_ok "rank $r: each communicator it made named by its constructor, with its size"
    else
        tap_not_ok "rank $r: each communicator it made named by its constructor, with its size"
        diff "$CCS_TMP/wantc.$r" "$CCS_TMP/gotc.$r" | head -20 | tap_diag
    fi
    r=$((r + 1))
done
# The collectives (not the point-to-point calls): on each communicator,
# each seq the same kind and fingerprint on every member that made it
# (per-rank counts of the v and neighbourhood kinds differ, and agree).
# Starts of persistent collectives are on no sequence (seq 0).
awk -F'\t' '$1 == "R" && $14 == "mpi" && $4 != 0 && $5 !~ /^(comm_|step$|send|recv)/ {
        k = $3 " " $4; v = $5 " " $13; if (!(k in first)) { first[k] = v; n++ } else if (first[k] != v) bad++ }
    END { print n + 0, bad + 0 }' "$CCS_TMP/dump" > "$CCS_TMP/fp"
# ccshim-audit's totals: per rank and kind, exactly the calls the program made.
AUDIT="$top_builddir/ccshim-audit"
for r in $(seq 0 $((NP - 1))); do awk -v r=$r '{print r, $1}' "$CCS_TMP/want.$r"; done | sort | uniq -c |
    awk '{print $2, $3, $1}' | sort > "$CCS_TMP/audit.want"
"$AUDIT" --tsv --no-symbols "$tr" 2> "$CCS_TMP/audit.err" |
    awk -F'\t' '$4 !~ /^(comm_|step$)/ && $2 ~ /^[0-9]+$/ {n[$2 " " $4] += $5} END {for (k in n) print k, n[k]}' |
    sort > "$CCS_TMP/audit.got"
if [ -s "$CCS_TMP/audit.want" ] && cmp -s "$CCS_TMP/audit.want" "$CCS_TMP/audit.got"; then
    tap_ok "ccshim-audit counts every call of every kind on every rank ($(awk '{s += $3} END {print s}' "$CCS_TMP/audit.want") calls)"
else
    tap_not_ok "ccshim-audit counts every call of every kind on every rank"
    diff "$CCS_TMP/audit.want" "$CCS_TMP/audit.got" | head -20 | tap_diag; head -5 "$CCS_TMP/audit.err" | tap_diag
fi
# Each start of a persistent collective is on no communicator's sequence
# (seq 0), each init on it: 28 + 21 starts a rank where the MPI has them.
starts=0
have HAVE_MPI_PERSISTENT_COLL && starts=28
have HAVE_MPI_PERSISTENT_COLL && have HAVE_MPI_LARGE_COUNT && starts=49
awk -F'\t' '$1 == "R" && $14 == "mpi" && $4 == 0 && $5 !~ /^comm_/ && $5 !~ /^(step|send|recv|sendrecv)$/ {n[$2]++}
    END {for (r in n) print r, n[r]}' "$CCS_TMP/dump" | sort > "$CCS_TMP/starts.got"
: > "$CCS_TMP/starts.want"
[ $starts -gt 0 ] && for r in $(seq 0 $((NP - 1))); do echo "$r $starts"; done > "$CCS_TMP/starts.want"
if cmp -s "$CCS_TMP/starts.want" "$CCS_TMP/starts.got"; then
    tap_ok "the $starts starts of persistent collectives a rank, and they alone, off the collective sequence"
else
    tap_not_ok "the $starts starts of persistent collectives a rank, and they alone, off the collective sequence"
    diff "$CCS_TMP/starts.want" "$CCS_TMP/starts.got" | tap_diag
fi
read groups bad < "$CCS_TMP/fp"
tap_check "each collective has one kind and fingerprint on every member ($groups collectives, $bad differ)" \
    test "$groups" -ge 40 -a "$bad" -eq 0
tap_done
