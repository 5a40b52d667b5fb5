#!/bin/sh
# bench/torch-bench.sh - step time of real DDP with a cached loss
# (tests/torch/ddp_job.py: Debian's torch on CPU, 2 ranks, DDP's buckets
# all-reduced through MPI by a comm hook; GradCache-style loss, 2 columns)
# four ways, alternated round by round in one run, medians:
#   per-mini-batch        what the job does (a reduction per bucket per backward)
#   no_sync               the code fix (no_sync() on all but the last backward),
#                         under ccshim's interception only, and under the same
#                         set-up as auto (--torch, desync on): what coalescing
#                         costs is auto against the latter
#   auto                  per-mini-batch under ccshim-run --torch --coalesce auto
#                         (the helper makes DDP skip all but the N-th backward's
#                         synchronisation once the pattern is agreed)
#   auto, all-reduce level  the same with --torch-ddp-skip 0 (ccshim answers
#                         N-1 reductions locally; DDP still copies buckets)
# on two shapes: 64 backward passes per step with batch 256 and mini-batch 8
# (the coalescing issue's), and the source report's numbers (batch 1024,
# mini-batch 32).  Writes docs/performance.md's section "torch-ddp".
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch, mpi4py' 2>/dev/null || { echo "torch-bench: skipped (python3-torch or python3-mpi4py missing)"; exit 0; }
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
JOB="$top_srcdir/tests/torch/ddp_job.py"
mpirun_() { timeout 600 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
range() { sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
step_ms() { awk '$1=="step_ms" {print $2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
RUN="$top_builddir/ccshim-run --mpi --summary 0"
# shape NAME ARGS: the four ways, alternated, ROUNDS rounds
shape() {
    local name=$1 r; shift
    : >"$tmp/$name.pm"; : >"$tmp/$name.ns"; : >"$tmp/$name.nt"; : >"$tmp/$name.au"; : >"$tmp/$name.ar"
    for r in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        mpirun_ $RUN --desync 0 -- $PY "$JOB" "$@" --mode per-minibatch | step_ms >>"$tmp/$name.pm"
        # shellcheck disable=SC2086
        mpirun_ $RUN --desync 0 -- $PY "$JOB" "$@" --mode no_sync | step_ms >>"$tmp/$name.ns"
        # shellcheck disable=SC2086
        mpirun_ $RUN --torch -- $PY "$JOB" "$@" --mode no_sync | step_ms >>"$tmp/$name.nt"
        # shellcheck disable=SC2086
        mpirun_ $RUN --torch --coalesce auto -- $PY "$JOB" "$@" --mode per-minibatch | step_ms >>"$tmp/$name.au"
        # shellcheck disable=SC2086
        mpirun_ $RUN --torch --coalesce auto --torch-ddp-skip 0 -- $PY "$JOB" "$@" --mode per-minibatch |
            step_ms >>"$tmp/$name.ar"
    done
}
rows() { # NAME: the table's rows
    local n=$1 pm ns nt au ar
    pm=$(median <"$tmp/$n.pm"); ns=$(median <"$tmp/$n.ns"); nt=$(median <"$tmp/$n.nt")
    au=$(median <"$tmp/$n.au"); ar=$(median <"$tmp/$n.ar")
    echo "| per-mini-batch (the job as written) | $pm ms ($(range <"$tmp/$n.pm")) | $(ratio "$pm" "$ns") | $(ratio "$pm" "$nt") |"
    echo "| no_sync() on all but the last backward (the code fix), interception only | $ns ms ($(range <"$tmp/$n.ns")) | 1 | $(ratio "$ns" "$nt") |"
    echo "| the same under \`--torch\` with desync on (auto's set-up) | $nt ms ($(range <"$tmp/$n.nt")) | $(ratio "$nt" "$ns") | 1 |"
    echo "| per-mini-batch under \`--torch --coalesce auto\` (DDP skips, from step 3) | $au ms ($(range <"$tmp/$n.au")) | $(ratio "$au" "$ns") | $(ratio "$au" "$nt") |"
    echo "| the same with \`--torch-ddp-skip 0\` (ccshim answers locally) | $ar ms ($(range <"$tmp/$n.ar")) | $(ratio "$ar" "$ns") | $(ratio "$ar" "$nt") |"
    echo "$n: per-mini-batch $pm, no_sync $ns, no_sync under --torch $nt, auto $au, all-reduce level $ar ms" >&2
}
shape issue --batch 256 --minibatch 8 --steps "$STEPS" --time
ROUNDS=${REPORT_ROUNDS:-5} shape report --batch 1024 --minibatch 32 --steps "$STEPS" --time
doc="$top_srcdir/docs/performance.md"
bench_write_section "$doc" torch-ddp <<MD
## Real PyTorch DDP with a cached loss (bench/torch-bench.sh)

Measured by \`make bench\` on $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, Debian's torch
$($PY -c 'import torch; print(torch.__version__)') on CPU, 2 ranks (Open MPI, vader), tests/torch/ddp_job.py
(2 columns; every backward all-reduces every DDP bucket through an mpi4py
comm hook unless DDP skips it), $STEPS steps; mean step time of steps 3 on,
median (and range) of the rounds, the five ways alternated in each round.
per-mini-batch and no_sync run under ccshim (interception only) so that the
hook's path is the same; no_sync also runs under auto's own set-up
(\`--torch\`, desync on), so that the last column is what coalescing itself
costs.  Target: auto at most 1.05x no_sync.

64 backward passes per step, batch 256 per rank, mini-batch 8 ($ROUNDS rounds):

| way | step time | ratio to no_sync | ratio to no_sync under \`--torch\` |
| --- | --- | --- | --- |
$(rows issue)

The source report's numbers, batch 1024 per rank, mini-batch 32 (${REPORT_ROUNDS:-5} rounds):

| way | step time | ratio to no_sync | ratio to no_sync under \`--torch\` |
| --- | --- | --- | --- |
$(rows report)
MD
echo "updated $doc"
