#!/bin/sh
# mpi-apps.sh - two real MPI applications from Debian, unmodified, on 2 ranks
# under ccshim-run with its defaults (desync detection on) and a trace:
#   - LAMMPS (lmp): a Lennard-Jones melt of 16384 atoms, 500 steps; its
#     thermodynamic output identical to a run without the shim, the same
#     counts on both ranks, the trace's all-reduces the summary's;
#   - HPCC (hpcc): the HPC Challenge suite at N=2000 on a 1x2 grid; HPL's
#     scaled residual identical to a run without the shim, every check of
#     the suite passed.
# Neither may draw a verdict or a warning.  Skipped where the packages
# (hpcc, lammps) are not installed; scripts/setup.sh installs them.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
LMP=$(command -v lmp || true)
HPCC=$(command -v hpcc || true)
[ -n "$LMP" ] || [ -n "$HPCC" ] || tap_skip_all "neither lmp (lammps) nor hpcc installed"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
APPS="$top_srcdir/tests/integration/apps" # the inputs (bench/job-bench.sh runs them too)
tap_plan 10

verdicts() { # DIR: verdict and warning lines of its logs
    cat "$1"/log-*.txt 2>/dev/null | grep -E '^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) |WARN|warning'
}

# --- LAMMPS ------------------------------------------------------------------
if [ -n "$LMP" ]; then
    d="$CCS_TMP/lmp"
    mkdir -p "$d/plain" "$d/shim"
    (cd "$d/plain" && ccs_mpirun 120 2 "$LMP" -in "$APPS/in.lj" -log none -screen out.txt > err.txt 2>&1)
    tap_eq "LAMMPS without the shim" 0 $?
    (cd "$d/shim" && ccs_mpirun 120 2 "$CCSHIM_RUN" --trace-dir "$d/trace" --log "$d/shim/log-%r.txt" -- \
        "$LMP" -in "$APPS/in.lj" -log none -screen out.txt > err.txt 2>&1)
    tap_eq "LAMMPS under ccshim-run (defaults, a trace)" 0 $?
    thermo() { sed -n '/^ *Step /,/^Loop time/p' "$1" | grep -v '^Loop time'; }
    thermo "$d/plain/out.txt" > "$d/plain/thermo"
    thermo "$d/shim/out.txt" > "$d/shim/thermo"
    tap_check "LAMMPS: the thermodynamic output (11 rows) identical to the run without the shim" sh -c \
        '[ "$(grep -c "^ *[0-9]" "$1")" = 11 ] && cmp -s "$1" "$2"' _ "$d/plain/thermo" "$d/shim/thermo"
    sums=$(sed -n 's/^ccshim\[[0-9]*@[^]]*\]: summary: \(.*\), trace .*/\1/p' "$d"/shim/log-*.txt | sort -u)
    ar=$(echo "$sums" | sed -n 's/.*(allreduce \([0-9]*\),.*/\1/p')
    recs=$("$CCSHIM_AUDIT" --tsv-records "$d/trace" 2>/dev/null |
        awk -F'\t' '!/^#/ && $4 == "allreduce" {n[$1]++} END {print n[0] + 0, n[1] + 0}')
    tap_check "LAMMPS: both ranks counted alike ($sums), the trace holds the summary's all-reduces on each ($recs)" \
        sh -c '[ "$(echo "$1" | grep -c .)" = 1 ] && [ -n "$2" ] && [ "$2" -gt 0 ] && [ "$3" = "$2 $2" ]' \
        _ "$sums" "$ar" "$recs"
    tap_eq "LAMMPS: no verdict, no warning" "" "$(verdicts "$d/shim")"
else
    for i in 1 2 3 4 5; do tap_skip "LAMMPS" "lmp not installed"; done
fi

# --- HPCC --------------------------------------------------------------------
if [ -n "$HPCC" ]; then
    d="$CCS_TMP/hpcc"
    mkdir -p "$d/plain" "$d/shim"
    cp "$APPS/hpccinf.txt" "$d/plain/"
    cp "$APPS/hpccinf.txt" "$d/shim/"
    (cd "$d/plain" && ccs_mpirun 180 2 "$HPCC" > out.txt 2>&1)
    tap_eq "HPCC without the shim" 0 $?
    (cd "$d/shim" && ccs_mpirun 180 2 "$CCSHIM_RUN" --log "$d/shim/log-%r.txt" -- "$HPCC" > out.txt 2>&1)
    tap_eq "HPCC under ccshim-run (defaults)" 0 $?
    hpl() { grep '^||Ax-b||_oo' "$1/hpccoutf.txt" 2>/dev/null; }
    tap_check "HPCC: HPL's scaled residual identical to the run without the shim ($(hpl "$d/shim"))" sh -c \
        '[ -n "$1" ] && [ "$1" = "$2" ] && echo "$1" | grep -q "PASSED$"' _ "$(hpl "$d/plain")" "$(hpl "$d/shim")"
    checks=$(grep -E '^(Success|PTRANS_residual|MPIRandomAccess_Errors|MPIRandomAccess_LCG_Errors)=' \
        "$d/shim/hpccoutf.txt" 2>/dev/null | sort | tr '\n' ' ')
    tap_eq "HPCC: the suite's own checks passed under the shim" \
        "MPIRandomAccess_Errors=0 MPIRandomAccess_LCG_Errors=0 PTRANS_residual=0 Success=1 " "$checks"
    nsum=$(cat "$d"/shim/log-*.txt 2>/dev/null | grep -c 'summary: [0-9]* collectives')
    tap_check "HPCC: no verdict, no warning ($nsum summaries)" \
        sh -c '[ -z "$1" ] && [ "$2" = 2 ]' _ "$(verdicts "$d/shim")" "$nsum"
else
    for i in 1 2 3 4 5; do tap_skip "HPCC" "hpcc not installed"; done
fi
tap_done
