#!/bin/sh
# memcheck.sh - the legal corpus under valgrind memcheck: tests/mpi-legal
# (2 ranks), the every-call program (3 ranks) and the intercommunicator
# program (3 ranks split 2+1, its per-peer arrays from malloc) run under
# ccshim with CCSHIM_ON_DESYNC=abort inside valgrind (--trace-children:
# valgrind follows ccshim-run's exec of the program, LD_PRELOAD and all).
# Each exits 0 with no verdict (the legal corpus with a plain run's result
# lines).  Then the detector's diagnostic path: a silent MISMATCH on 3 ranks
# (desync_scenario op, warned of): the host's search, the verdict shared
# through shared memory and the report block.  vg_ccshim.py finds no error
# in any of them, leak included, whose innermost
# ccshim frame is ccshim's own code: Open MPI's own reports (openmpi.supp,
# or under a wrapper that forwards the job's call unchanged) do not count.
# First, the filter itself: on a report of ccshim's it fails and names the
# frame, on Open MPI's it passes.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
VALGRIND=${VALGRIND:-valgrind}
command -v "$VALGRIND" > /dev/null 2>&1 || tap_skip_all "valgrind not installed"
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" > /dev/null 2>&1 || tap_skip_all "python3 not installed (vg_ccshim.py)"
here="$top_srcdir/tests/memcheck"
FILTER="$PYTHON $here/vg_ccshim.py --src $top_srcdir/src"
LEGAL="$top_builddir/tests/mpi-legal/legal"
EVERY="$top_builddir/tests/integration/mpi_every_call"
INTER="$top_builddir/tests/mpi-inter/inter"
SCENARIO="$top_builddir/tests/desync/desync_scenario"
for p in "$LEGAL" "$EVERY" "$INTER" "$SCENARIO"; do [ -x "$p" ] || tap_skip_all "$p not built"; done
tap_plan 15

# The filter, on two reports of valgrind 3.19 kept beside it.
$FILTER "$here/fixtures/ccshim-over-read.xml" > "$CCS_TMP/f1" 2>&1
tap_eq "the filter fails on ccshim's over-read (sum_counts in an intercommunicator allgatherv)" "1 errors 2: ccshim 1, forwarded 1, other 0, suppressed 0 sum_counts" \
    "$? $(head -1 "$CCS_TMP/f1") $(grep -o -m1 'sum_counts' "$CCS_TMP/f1")"
$FILTER "$here/fixtures/openmpi-own.xml" > "$CCS_TMP/f2" 2>&1
tap_eq "the filter passes Open MPI's own reports (a leak in MPI_Init, PMIx's padding)" "0 errors 2: ccshim 0, forwarded 1, other 1, suppressed 3" \
    "$? $(head -1 "$CCS_TMP/f2")"

# vg NAME NP PROGRAM ARGS...: the program under ccshim under valgrind
# (CCSHIM_ON_DESYNC=abort unless ON_DESYNC says otherwise).
vg() {
    local name=$1 np=$2; shift 2
    mkdir -p "$CCS_TMP/$name/trace"
    ccs_mpirun 150 "$np" env CCSHIM_LOG="$CCS_TMP/$name/log-%r.txt" CCSHIM_TRACE_DIR="$CCS_TMP/$name/trace" \
        CCSHIM_SUMMARY=0 CCSHIM_JOB_ID="vg$name" CCSHIM_ON_DESYNC="${ON_DESYNC:-abort}" \
        "$VALGRIND" --trace-children=yes --error-limit=no --num-callers=40 --leak-check=full \
        --show-leak-kinds=definite --errors-for-leak-kinds=definite --suppressions="$here/openmpi.supp" \
        --xml=yes --xml-file="$CCS_TMP/$name/vg.%p.xml" "$CCSHIM_RUN" --mpi -- "$@" \
        > "$CCS_TMP/$name/out" 2> "$CCS_TMP/$name/err"
}
verdicts() { cat "$CCS_TMP/$1"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true; }

start=$(date +%s)
ccs_mpirun 60 2 "$LEGAL" > "$CCS_TMP/legal.plain" 2>&1
vg legal 2 "$LEGAL"
tap_eq "legal corpus, 2 ranks, under valgrind: exits 0" 0 $?
sort "$CCS_TMP/legal.plain" > "$CCS_TMP/legal.plain.sorted"
sort "$CCS_TMP/legal/out" > "$CCS_TMP/legal.vg.sorted"
lines=$(wc -l < "$CCS_TMP/legal.plain.sorted" | tr -d ' ')
if [ "$lines" -gt 40 ] && cmp -s "$CCS_TMP/legal.plain.sorted" "$CCS_TMP/legal.vg.sorted"; then
    tap_ok "legal corpus: the plain run's $lines result lines"
else
    tap_not_ok "legal corpus: the plain run's $lines result lines"
    diff "$CCS_TMP/legal.plain.sorted" "$CCS_TMP/legal.vg.sorted" | head -10 | tap_diag
fi
tap_eq "legal corpus: no verdict" "" "$(verdicts legal)"

vg every 3 "$EVERY" "$CCS_TMP/every"
tap_eq "every-call, 3 ranks, under valgrind: exits 0" 0 $?
tap_eq "every-call: no verdict" "" "$(verdicts every)"

INTER_MALLOC=1 vg inter 3 "$INTER" 2 "$CCS_TMP/inter"
tap_eq "intercommunicators 2+1, arrays from malloc, under valgrind: exits 0" 0 $?
tap_eq "intercommunicators: no verdict" "" "$(verdicts inter)"

# Rank 1's all-reduce at iteration 20 (seq 21) takes MPI_MAX where ranks 0
# and 2 sum: it completes, so only the search of the running hashes finds
# it.  SETTLE_MS: valgrind's threads run slowly, the ranks wait this long
# before finalizing.
ON_DESYNC=warn SETTLE_MS=3000 vg mismatch 3 "$SCENARIO" op 40 20
tap_eq "a silent MISMATCH on 3 ranks under valgrind: exits 0" 0 $?
# Every rank sees it (its own report file); one host: one rank logs it.
tap_eq "the MISMATCH seen by every rank, naming rank 1 at seq 21" \
    "0 1 2 " "$(for r in 0 1 2; do grep -qE '^ccshim MISMATCH .* seq=21: rank 1 issued allreduce\(count=4, float32, max\) where ranks 0,2 issued allreduce\(count=4, float32, sum\)' "$CCS_TMP/mismatch/trace/ccshim-desync-vgmismatch-r$r.txt" 2>/dev/null && printf '%s ' $r; done)"
tap_eq "one MISMATCH line and block in the log, with the parties' operations side by side" "1 1" \
    "$(verdicts mismatch | grep -c '^ccshim MISMATCH ') $(cat "$CCS_TMP"/mismatch/log-*.txt | grep -c '^ccshim desync| *rank 1 ')"
echo "# valgrind runs: $(($(date +%s) - start)) s"

n=$(ls "$CCS_TMP"/legal/vg.*.xml "$CCS_TMP"/every/vg.*.xml "$CCS_TMP"/inter/vg.*.xml "$CCS_TMP"/mismatch/vg.*.xml 2>/dev/null | wc -l)
tap_eq "one valgrind report per rank" 11 "$n"
$FILTER "$CCS_TMP"/legal/vg.*.xml "$CCS_TMP"/every/vg.*.xml "$CCS_TMP"/inter/vg.*.xml "$CCS_TMP"/mismatch/vg.*.xml > "$CCS_TMP/verdict" 2>&1
rc=$?
head -1 "$CCS_TMP/verdict" | tap_diag
tap_eq "no error of ccshim's in the 11 reports" 0 "$rc"
[ "$rc" = 0 ] || head -60 "$CCS_TMP/verdict" | tap_diag
# Valgrind followed ccshim-run into the programs (and finished them: the
# filter fails on a report without its FINISHED status).
got=$(cat "$CCS_TMP"/legal/vg.*.xml "$CCS_TMP"/every/vg.*.xml "$CCS_TMP"/inter/vg.*.xml "$CCS_TMP"/mismatch/vg.*.xml |
    sed -n 's|^ *<exe>.*/\([a-z_]*\)</exe>|\1|p' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
tap_eq "the reports are the programs' own (valgrind followed the exec)" " 3 desync_scenario; 3 inter; 2 legal; 3 mpi_every_call;" "$got"
tap_done
