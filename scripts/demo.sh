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
run() { # NAME ARGS...: the trainer on 4 ranks under ccshim-run, then the audit
    local name=$1; shift
    echo
    echo "=== $name"
    timeout 300 mpirun -np 4 --mca btl self,vader ./ccshim-run --trace-dir "$out/$name" "$@" \
        -- ./ccshim-trainer --batch 1024 --minibatch 32 --columns 2 --steps 3 --json-summary "$out/$name.json" \
        "${TRAINER_ARGS[@]}" | tail -4
    ./ccshim-audit --no-symbols "$out/$name" | sed -n '1,/^top call sites/p' | head -40
}
if [ -x ./ccshim-trainer ]; then
    TRAINER_ARGS=(--sync=per-minibatch)
    run per-minibatch
    TRAINER_ARGS=(--sync=per-step)
    run per-step
    TRAINER_ARGS=(--sync=per-minibatch)
    run coalesced --set CCSHIM_COALESCE=auto 2>/dev/null || echo "(coalescing not available in this build)"
    echo
    echo "final parameter checksums (must be equal):"
    for n in per-minibatch per-step coalesced; do
        [ -f "$out/$n.json" ] && printf '  %-14s %s\n' "$n" "$(grep -o '"checksum":[^,}]*' "$out/$n.json")"
    done
else
    echo "=== MPI pattern program on 4 ranks under the shim"
    make -s tests/integration/mpi_pattern
    timeout 120 mpirun -np 4 --mca btl self,vader ./ccshim-run --trace-dir "$out/pattern" -- ./tests/integration/mpi_pattern
    ./ccshim-audit "$out/pattern"
fi
