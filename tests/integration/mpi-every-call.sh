#!/bin/sh
# mpi-every-call.sh - every MPI function ccshim records (tests/integration/
# mpi_every_call.c: each generated wrapper of CCS_MPI_GENERATED, blocking and
# nonblocking, with and without MPI_IN_PLACE, and MPI_(I)allreduce), on 3
# ranks: each rank's trace holds exactly the records the program says the
# matching rules give (kind, flags, root or peer, count, datatype, op,
# bytes), in call order, and every collective's fingerprint is the same on
# every rank.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
prog="$top_builddir/tests/integration/mpi_every_call"
DUMP="$top_builddir/tests/ccs_trace_dump"
[ -x "$prog" ] || tap_skip_all "mpi_every_call not built"
[ -x "$DUMP" ] || tap_skip_all "ccs_trace_dump not built"
NP=3
tap_plan $((NP + 3))

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
    # 34 collectives and a sendrecv; ranks 0 and 1 also send and receive twice.
    n=35; [ $r -lt 2 ] && n=37
    if [ "$(wc -l < "$CCS_TMP/want.$r")" -eq $n ] && cmp -s "$CCS_TMP/want.$r" "$CCS_TMP/got.$r"; then
        tap_ok "rank $r: the $n records the rules give, in call order"
    else
        tap_not_ok "rank $r: the $n records the rules give, in call order"
        diff "$CCS_TMP/want.$r" "$CCS_TMP/got.$r" | head -20 | tap_diag
        head -5 "$CCS_TMP/err" "$CCS_TMP/dump.err" | tap_diag
    fi
    r=$((r + 1))
done
# The collectives (not the point-to-point calls) numbered alike everywhere.
awk -F'\t' '$1 == "R" && $14 == "mpi" && $5 !~ /^(comm_|step$|send|recv)/ {print $2, $4, $5, $13}' "$CCS_TMP/dump" |
    sort -k2,2n -k1,1n | awk '{k = $2 " " $3 " " $4; if (k != prev) {d++; prev = k}} END {print d, NR}' > "$CCS_TMP/fp"
read distinct total < "$CCS_TMP/fp"
tap_eq "each collective has one sequence number and fingerprint on all $NP ranks" "$((total / NP))" "$distinct"
tap_done
