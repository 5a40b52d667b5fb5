#!/usr/bin/env bash
# scripts/demo.sh - set up (setup.sh), then show ccshim on a real job:
#  1. the reference cached-loss trainer (B=1024, m=32, two columns, 4 ranks)
#     under the shim, per-mini-batch synchronisation: 64 reductions per step;
#     then the fix (per-step): 1; then per-mini-batch with CCSHIM_COALESCE=auto;
#  2. ccshim-audit on each run's traces.
# Without the trainer (no BLAS), the MPI pattern program is shown instead.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CCSHIM_BUILD:-$top/_build}
"$top/scripts/setup.sh"
cd "$build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=${CCSHIM_DEMO_DIR:-$build/demo}
rm -rf "$out"; mkdir -p "$out"
run() { # NAME TRAINER-ARGS... [-- SHIM-OPTIONS...]: 4 ranks under ccshim-run, then the audit
    local name=$1; shift
    local targs=() sargs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do targs+=("$1"); shift; done
    [ $# -gt 0 ] && shift && sargs=("$@")
    echo
    echo "=== $name: ccshim-trainer ${targs[*]} ${sargs[*]:+(shim: ${sargs[*]})}"
    timeout 300 mpirun -np 4 --mca btl self,vader ./ccshim-run --summary 0 --trace-dir "$out/$name" "${sargs[@]}" \
        -- ./ccshim-trainer --local-batch 1024 --mini-batch 32 --columns 2 --steps 5 "${targs[@]}" \
        > "$out/$name.out"
    grep '^step' "$out/$name.out"
    tail -1 "$out/$name.out" > "$out/$name.json"
    ./ccshim-audit --no-symbols "$out/$name" | sed -n '/^steps /,/^top call sites/p' | sed '$d'
}
if [ -x ./ccshim-trainer ]; then
    # The numbers of the sentence-transformers report: 1024 rows per rank in
    # mini-batches of 32, anchor and positive columns, one gradient bucket.
    run per-minibatch --sync per-minibatch
    run per-step --sync per-step
    run coalesced --sync per-minibatch -- --coalesce auto
    echo
    echo "all-reduces per step by the trainer's own count, and final parameter checksums"
    echo "(equal, up to the order of floating-point sums: per-step adds the mini-batches locally first):"
    for n in per-minibatch per-step coalesced; do
        printf '  %-14s %s %s\n' "$n" "$(grep -o '"reductions_per_step":[0-9]*' "$out/$n.json")" \
            "$(grep -o '"checksum":[^,}]*' "$out/$n.json")"
    done
    echo "(the coalesced run issues 64 calls per step; ccshim answers 63 locally and sends 1: see its audit above)"
else
    echo "=== MPI pattern program on 4 ranks under the shim"
    make -s tests/integration/mpi_pattern
    timeout 120 mpirun -np 4 --mca btl self,vader ./ccshim-run --trace-dir "$out/pattern" -- ./tests/integration/mpi_pattern
    ./ccshim-audit "$out/pattern"
fi
