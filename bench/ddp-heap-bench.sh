#!/bin/sh
# bench/ddp-heap-bench.sh - what the first steps of a run do to the steps after
# them, with no ccshim at all: tests/torch/ddp_job.py on the source report's
# shape (batch 1024 per rank, mini-batch 32, 2 columns; Debian's torch, CPU,
# 2 ranks, glibc's default malloc), every step from step 2 under the job's own
# no_sync(), steps 0-1 three ways, alternated round by round:
#   no_sync        the code fix from the first step
#   per-minibatch  every backward of steps 0-1 synchronised: what ccshim's
#                  torch helper learns the step's pattern from before it makes
#                  DDP skip, when the step is not announced by a cached loss's
#                  no-grad forwards or under --torch-predict 0 (docs/coalescing.md)
#   local          no backward of steps 0-1 synchronised, the gradients
#                  averaged once before each of their optimizer steps
#   first-synced   only the first backward of steps 0-1 synchronised, the
#                  gradients averaged before each optimizer step: DDP rebuilds
#                  its buckets once, at the forward after its first
#                  synchronised backward, here in the middle of step 0
#   late-synced    step 0 as under no_sync (its last backward synchronised),
#                  every backward of step 1: the rebuild at step 1's start
# Step time and page faults of steps 3 on, and whether the parameters are
# bitwise those of no_sync.  Writes docs/performance.md's section "torch-heap".
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
bench_torch_python ddp-heap-bench
ROUNDS=${ROUNDS:-8}
STEPS=${STEPS:-30}
[ "$STEPS" -gt 3 ] || { echo "ddp-heap-bench: STEPS=$STEPS: need more than 3 (steps 3 on are timed)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
JOB="$top_srcdir/tests/torch/ddp_job.py"
SHAPE="--batch 1024 --minibatch 32 --steps $STEPS --time --mode no_sync"
one() { # WAY ARGS: one run; its step_ms, faults_per_step and digest appended to WAY.*
    local way=$1; shift
    # shellcheck disable=SC2086
    bench_mpirun2 $PY "$JOB" $SHAPE "$@" >"$tmp/last.out" 2>"$tmp/last.err" &&
        grep -q '^step_ms ' "$tmp/last.out" && grep -q '^digest ' "$tmp/last.out" ||
        { echo "ddp-heap-bench: failed: $way" >&2; cat "$tmp/last.err" >&2; exit 1; }
    awk '$1=="step_ms" {print $2}' "$tmp/last.out" >>"$tmp/$way.ms"
    awk '$1=="faults_per_step" {print $2}' "$tmp/last.out" >>"$tmp/$way.pf"
    awk '$1=="digest" {print $2}' "$tmp/last.out" >>"$tmp/$way.dg"
}
for r in $(seq "$ROUNDS"); do
    one ns
    one pm --first 2 --first-way per-minibatch
    one lo --first 2 --first-way local
    one fs --first 2 --first-way first-synced
    one ls --first 2 --first-way late-synced
    echo "round $r of $ROUNDS done" >&2
done
ns=$(bench_median <"$tmp/ns.ms")
# the parameters of a way are no_sync's when every run of it ended with the
# one digest every no_sync run ended with
if [ "$(sort -u "$tmp/ns.dg" | wc -l)" = 1 ]; then digest_ns=$(sort -u "$tmp/ns.dg"); else digest_ns=""; fi
row() { # LABEL WAY
    local m same
    m=$(bench_median <"$tmp/$2.ms")
    if [ -z "$digest_ns" ]; then
        same="not known: no_sync's own runs ended with different parameters"
    else
        same=$(sort -u "$tmp/$2.dg" | awk -v d="$digest_ns" '$1 != d {x = 1} END {print (NR && !x) ? "yes" : "no"}')
    fi
    echo "| $1 | $m ms ($(bench_range "$tmp/$2.ms")) | $(bench_median <"$tmp/$2.pf") ($(bench_range "$tmp/$2.pf")) | $(bench_ratio "$m" "$ns") | $same |"
}
table=$(
    echo "| steps 0-1 | step time | page faults per step (rank 0) | ratio to no_sync | parameters bitwise those of no_sync |"
    echo "| --- | --- | --- | --- | --- |"
    row "no_sync() (the code fix throughout)" ns
    row "every backward synchronised (what the helper learns from under \`--torch-predict 0\`)" pm
    row "none synchronised, gradients averaged once per step" lo
    row "only each step's first synchronised (DDP's bucket rebuild in the middle of step 0), gradients averaged" fs
    row "step 0 as no_sync, every backward of step 1 synchronised (the rebuild at step 1's start)" ls
)
echo "$table"
bench_write_section "$top_srcdir/docs/performance.md" torch-heap <<MD
### What the learning steps leave behind (bench/ddp-heap-bench.sh)

Measured by \`make bench\` on $(date -u +%Y-%m-%d), no ccshim at all: tests/torch/ddp_job.py
on the source report's shape (batch 1024 per rank, mini-batch 32), Debian's torch
$($PY -c 'import torch; print(torch.__version__)'), 2 ranks, glibc's default malloc, $STEPS steps, $ROUNDS
rounds alternated.  Every step from step 2 runs under the job's own \`no_sync()\`;
only steps 0-1 differ.  Medians of each run's median over steps 3 on.

$table
MD
