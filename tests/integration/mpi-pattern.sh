#!/bin/sh
# mpi-pattern.sh - tests/integration/mpi_pattern on 4 ranks under ccshim-run:
# exact counts per rank, communicator and step; the same sequence numbers and
# fingerprints on every member; results identical to a run without the shim;
# bad settings (set without ccshim-run) reported in one line each while the
# job runs on unchanged.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
prog="$top_builddir/tests/integration/mpi_pattern"
NP=4
tap_plan 14

ccs_mpirun 60 $NP "$prog" > "$CCS_TMP/plain.out" 2> "$CCS_TMP/plain.err"
tap_eq "baseline run without the shim" 0 $?
sort "$CCS_TMP/plain.out" > "$CCS_TMP/plain.sorted"

tr="$CCS_TMP/trace"
mkdir -p "$CCS_TMP/logs"
ccs_mpirun 60 $NP "$CCSHIM_RUN" --trace-dir "$tr" --log "$CCS_TMP/logs/r%r-%h.log" -- "$prog" \
    > "$CCS_TMP/shim.out" 2> "$CCS_TMP/shim.err"
tap_eq "run under ccshim-run" 0 $?
sort "$CCS_TMP/shim.out" > "$CCS_TMP/shim.sorted"
tap_check "every result identical to the run without the shim" cmp -s "$CCS_TMP/plain.sorted" "$CCS_TMP/shim.sorted"
tap_eq "one trace per rank" $NP "$(ls "$tr"/*.cctrace 2>/dev/null | wc -l)"

"$CCSHIM_AUDIT" --tsv-records "$tr" > "$CCS_TMP/rec.tsv" 2> "$CCS_TMP/audit.err"
"$CCSHIM_AUDIT" --tsv "$tr" > "$CCS_TMP/cells.tsv" 2>> "$CCS_TMP/audit.err"
# columns: rank seq comm kind count dtype op root fingerprint step flags site
world=$(awk -F'\t' '!/^#/ && $1==0 && $4=="bcast" {print $3; exit}' "$CCS_TMP/rec.tsv")

# Exact counts of world's calls per step and kind, the same for every rank.
expect_world="$CCS_TMP/expect_world"
for s in 0 1 2; do
    printf '%s\tallgather\t1\n%s\tallreduce\t4\n%s\tbarrier\t1\n%s\tbcast\t1\n%s\treduce\t1\n%s\tsendrecv\t1\n' \
        $s $s $s $s $s $s
done > "$expect_world"
printf '3\tcomm_split\t1\n' >> "$expect_world"
ok=1
for r in 0 1 2 3; do
    awk -F'\t' -v r=$r -v w="$world" '!/^#/ && $2==r && $3==w && $7==0 {print $1"\t"$4"\t"$5}' "$CCS_TMP/cells.tsv" |
        sort > "$CCS_TMP/got_world.$r"
    cmp -s "$expect_world" "$CCS_TMP/got_world.$r" || { ok=0; diff "$expect_world" "$CCS_TMP/got_world.$r" | tap_diag; }
done
tap_eq "exact counts per step and kind on MPI_COMM_WORLD, every rank" 1 $ok

# The collective stream (seq kind fingerprint step) is identical on every rank
# and numbered 1..25 without a gap.
for r in 0 1 2 3; do
    awk -F'\t' -v r=$r -v w="$world" '!/^#/ && $1==r && $3==w && $4!="sendrecv" && $4!="comm_free" {print $2"\t"$4"\t"$9"\t"$10}' \
        "$CCS_TMP/rec.tsv" | sort -n > "$CCS_TMP/seq.$r"
done
same=1
for r in 1 2 3; do cmp -s "$CCS_TMP/seq.0" "$CCS_TMP/seq.$r" || same=0; done
tap_eq "same sequence numbers and fingerprints on every rank" 1 $same
tap_eq "sequence numbers 1..25 without a gap" "$(seq 1 25 | tr '\n' ' ')" "$(cut -f1 "$CCS_TMP/seq.0" | tr '\n' ' ')"

# Flags: the second allreduce of each step is in place, the iallreduce nonblocking.
inplace=$(awk -F'\t' -v w="$world" '!/^#/ && $1==0 && $3==w && $4=="allreduce" && $11 ~ /in_place/' "$CCS_TMP/rec.tsv" | wc -l)
nb=$(awk -F'\t' -v w="$world" '!/^#/ && $1==0 && $3==w && $4=="allreduce" && $11 ~ /nonblocking/ && $5==8 && $7=="max"' "$CCS_TMP/rec.tsv" | wc -l)
tap_eq "in-place and nonblocking calls flagged (3 each)" "3 3" "$inplace $nb"

# Split communicator: ranks 0,2 share one identity, 1,3 another.
half() { awk -F'\t' -v r=$1 '!/^#/ && $1==r && $4=="alltoall" {print $3}' "$CCS_TMP/rec.tsv"; }
h0=$(half 0); h1=$(half 1); h2=$(half 2); h3=$(half 3)
tap_check "split halves: same identity within, different across" \
    sh -c "[ -n '$h0' ] && [ '$h0' = '$h2' ] && [ '$h1' = '$h3' ] && [ '$h0' != '$h1' ] && [ '$h0' != '$world' ]"
# On each half: allreduce x3 (one through PMPI_Allreduce), alltoall, scan, in one order.
for r in 0 1 2 3; do
    eval "h=\$h$r"
    awk -F'\t' -v r=$r -v h="$h" '!/^#/ && $1==r && $3==h && $2>0 {print $2"\t"$4"\t"$9}' "$CCS_TMP/rec.tsv" |
        sort -n > "$CCS_TMP/half.$r"
done
tap_eq "half communicator: 5 sequenced calls incl. the PMPI_ entry" \
    "1 allreduce 2 allreduce 3 alltoall 4 scan 5 allreduce" \
    "$(cut -f1,2 "$CCS_TMP/half.0" | tr '\t\n' '  ' | sed 's/ $//')"
tap_check "half members agree call by call" sh -c "cmp -s '$CCS_TMP/half.0' '$CCS_TMP/half.2' && cmp -s '$CCS_TMP/half.1' '$CCS_TMP/half.3'"

# Summary line at exit, one per rank, in the log file its pattern names.
host=$(hostname)
tap_eq "one summary line per rank, in CCSHIM_LOG=logs/r%r-%h.log" "0 1 2 3" "$(for r in 0 1 2 3; do
    grep -q "^ccshim\[$r@.*summary: 29 collectives, 3 point-to-point" "$CCS_TMP/logs/r$r-$host.log" && printf '%s ' $r
    done | sed 's/ $//')"

# Bad input set without ccshim-run (which refuses it before launch:
# ccshim-run.sh): the library names each bad value with what is accepted,
# and the job runs on unchanged.
ccs_mpirun 60 $NP env CCSHIM_RING_SIZE=lots CCSHIM_LOG_LEVEL=chatty CCSHIM_TRACE_DIR=/proc/no/such/dir \
    LD_PRELOAD="$top_builddir/.libs/libccshim-mpi.so" "$prog" \
    > "$CCS_TMP/bad.out" 2> "$CCS_TMP/bad.err"
rc=$?
sort "$CCS_TMP/bad.out" > "$CCS_TMP/bad.sorted"
tap_check "bad settings: the job succeeds with identical results" \
    sh -c "[ $rc -eq 0 ] && cmp -s '$CCS_TMP/plain.sorted' '$CCS_TMP/bad.sorted'"
n1=$(grep -c "CCSHIM_RING_SIZE='lots' ignored: expected a decimal integer in 1024..16777216; using the default '65536'" "$CCS_TMP/bad.err")
n2=$(grep -c "CCSHIM_LOG_LEVEL='chatty' ignored: expected one of: error warn info debug" "$CCS_TMP/bad.err")
n3=$(grep -c "CCSHIM_TRACE_DIR='/proc/no/such/dir' is not a writable directory.*tracing is off" "$CCS_TMP/bad.err")
tap_eq "one log line per rank for each bad value" "$NP $NP $NP" "$n1 $n2 $n3"
tap_done
