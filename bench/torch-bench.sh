#!/bin/sh
# bench/torch-bench.sh - step time of the real-DDP seed reproduction
# (tests/torch/ddp_job.py: Debian's torch on CPU, 2 ranks, DDP's buckets
# all-reduced through MPI by a comm hook; GradCache cached loss with the
# source report's numbers: batch 1024 per rank, mini-batch 32, 2 columns:
# 64 bucket reductions per step) in three ways, alternated round by round
# in one run, medians: per-mini-batch (what the job does), no_sync (the
# code fix) and per-mini-batch under ccshim-run --coalesce auto.
# Writes docs/performance.md's section "torch-ddp".
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch, mpi4py' 2>/dev/null || { echo "torch-bench: skipped (python3-torch or python3-mpi4py missing)"; exit 0; }
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
JOB="$top_srcdir/tests/torch/ddp_job.py"
ARGS="--batch 1024 --minibatch 32 --steps $STEPS --time"
mpirun_() { timeout 600 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
step_ms() { awk '$1=="step_ms" {print $2}'; }
: >"$tmp/pm"; : >"$tmp/ns"; : >"$tmp/co"
for r in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086
    mpirun_ "$top_builddir/ccshim-run" --mpi --desync 0 --summary 0 -- $PY "$JOB" $ARGS --mode per-minibatch | step_ms >>"$tmp/pm"
    # shellcheck disable=SC2086
    mpirun_ "$top_builddir/ccshim-run" --mpi --desync 0 --summary 0 -- $PY "$JOB" $ARGS --mode no_sync | step_ms >>"$tmp/ns"
    # shellcheck disable=SC2086
    mpirun_ "$top_builddir/ccshim-run" --mpi --torch --coalesce auto --summary 0 -- $PY "$JOB" $ARGS --mode per-minibatch |
        step_ms >>"$tmp/co"
done
pm=$(median <"$tmp/pm"); ns=$(median <"$tmp/ns"); co=$(median <"$tmp/co")
echo "real DDP seed reproduction, step time: per-mini-batch $pm ms, no_sync $ns ms, coalesced (auto) $co ms"
doc="$top_srcdir/docs/performance.md"
bench_write_section "$doc" torch-ddp <<MD
## Real PyTorch DDP, the source report's numbers (bench/torch-bench.sh)

Measured by \`make bench\` on $(date -u +%Y-%m-%d), $(nproc) cores, Debian's torch
$($PY -c 'import torch; print(torch.__version__)') on CPU, 2 ranks (Open MPI, vader), tests/torch/ddp_job.py
with batch 1024 per rank, mini-batch 32, 2 columns (64 backward passes, each
all-reducing every DDP bucket through an mpi4py comm hook), $STEPS steps;
mean step time of steps 3 on, median of $ROUNDS rounds, the three ways
alternated in each round.  per-mini-batch and no_sync run under ccshim
(interception only) so that the hook's path is the same.

| way | step time | ratio to per-mini-batch |
| --- | --- | --- |
| per-mini-batch (the job as written: 64 reductions per bucket per step) | $pm ms | 1 |
| no_sync() on all but the last mini-batch (the code fix) | $ns ms | $(awk -v a="$pm" -v b="$ns" 'BEGIN {printf "%.3f", b / a}') |
| per-mini-batch under \`ccshim-run --torch --coalesce auto\` (1 real per bucket per step from step 3) | $co ms | $(awk -v a="$pm" -v b="$co" 'BEGIN {printf "%.3f", b / a}') |
MD
echo "updated $doc"
