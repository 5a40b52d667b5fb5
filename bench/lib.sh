# bench/lib.sh - sourced by the benchmarks.

# bench_write_section DOC NAME < TEXT: puts TEXT between the lines
# "<!-- BEGIN NAME -->" and "<!-- END NAME -->" of DOC, replacing what was
# there (the section is appended when missing, DOC created when absent).  Each
# benchmark owns its section; the rest of the page stays as it is.
bench_write_section() {
    local doc=$1 name=$2 tmp
    tmp=$(mktemp) || return 1
    cat >"$tmp.sec"
    [ -f "$doc" ] || printf '# Performance\n\nFigures written by `make bench`; each section by its own benchmark.\n' >"$doc"
    awk -v sec="$tmp.sec" -v b="<!-- BEGIN $name -->" -v e="<!-- END $name -->" '
        $0 == b { print; while ((getline l < sec) > 0) print l; skip = 1; done = 1; next }
        $0 == e { skip = 0 }
        !skip { print }
        END { if (!done) { print ""; print b; while ((getline l < sec) > 0) print l; print e } }' "$doc" >"$tmp"
    cat "$tmp" >"$doc"
    rm -f "$tmp" "$tmp.sec"
}

# bench_median < NUMBERS: their median (the mean of the middle two for an
# even count; sort -g: numbers with exponents too).
bench_median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# bench_range FILE: "LOW to HIGH" of the numbers in FILE.
bench_range() { sort -n "$1" | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s to %s", lo, hi}'; }

# bench_ratio A B: A / B to three decimals.
bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

# bench_round_ratios A B: B's figure over A's, one line per round (files of
# one figure per round, in round order; a round where A is 0 left out).
bench_round_ratios() { paste "$1" "$2" | awk '$1 > 0 {printf "%.4f\n", $2 / $1}'; }

# bench_round_diffs A B: B's figure minus A's, one line per round (files as
# for bench_round_ratios).
bench_round_diffs() { paste "$1" "$2" | awk '{printf "%.2f\n", $2 - $1}'; }

# glibc's trim and mmap thresholds fixed (GLIBC_TUNABLES), so that the torch
# jobs' 4 MiB tensors are not given back to the kernel and faulted in again
# every step (docs/performance.md, "Real PyTorch DDP with a cached loss").
BENCH_STEADY_HEAP="glibc.malloc.trim_threshold=268435456:glibc.malloc.mmap_threshold=33554432"

# bench_cpu: the processor's model name (which host a figure is from).
bench_cpu() { awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo; }

# bench_mpirun NP PROGRAM...: NP ranks over shared memory (vader), as root
# if need be, killed after 600 s; bench_mpirun2: on 2.
bench_mpirun() {
    local np=$1
    shift
    timeout 600 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np" "$@"
}
bench_mpirun2() { bench_mpirun 2 "$@"; }

# bench_torch_python NAME: sets PY to Debian's /usr/bin/python3 when it imports
# torch and mpi4py; else says that benchmark NAME is skipped and exits 0.
bench_torch_python() {
    PY=/usr/bin/python3
    $PY -c 'import torch, mpi4py' 2>/dev/null ||
        { echo "$1: skipped (python3-torch or python3-mpi4py missing)"; exit 0; }
}
