#!/bin/sh
# bench/torch-bench.sh - step time of real DDP with a cached loss against the
# code fix (no_sync), alternated round by round in one run, medians:
#
# 1. tests/torch/ddp_job.py (Debian's torch on CPU, 2 ranks, DDP's buckets
#    all-reduced through MPI by a comm hook; GradCache-style loss, 2 columns),
#    six ways:
#      per-mini-batch    what the job does (a reduction per bucket per backward)
#      no_sync           the code fix (no_sync() on all but the last backward),
#                        under ccshim's interception only, and under the same
#                        set-up as auto (--torch, desync on)
#      auto              per-mini-batch under ccshim-run --torch --coalesce auto
#                        (DDP skips all but the N-th backward's synchronisation
#                        from the first step, which the cached loss's no-grad
#                        forwards announce), and the same learning the pattern
#                        from synchronised steps first (--torch-predict 0)
#      auto, all-reduce level  the same with --torch-ddp-skip 0
#    on two shapes (the coalescing issue's: batch 256, mini-batch 8; the source
#    report's: batch 1024, mini-batch 32), each under glibc's default malloc
#    and under a steady heap (GLIBC_TUNABLES fixing the trim and mmap
#    thresholds): the job's 4 MiB loss tensors are given back to the kernel
#    and faulted in again on every step, between 1 and 6 of them per step
#    depending on where the heap's top happens to lie, a difference of up to
#    ~8 ms a step that moves from run to run and between ways; the steady
#    heap takes it out, so that what is left is the ways' own cost.
# 2. sentence-transformers' Trainer (tests/realstack/trainer_job.py, torch 2.13
#    from the real-stack venv, all-MiniLM-L6-v2, batch 64, mini-batch 8): the
#    report's code fix (--fix no_sync) against per-mini-batch under auto.
# Writes docs/performance.md's section "torch-ddp".
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
bench_torch_python torch-bench
ROUNDS=${ROUNDS:-7}
STEPS=${STEPS:-30}
ST_ROUNDS=${ST_ROUNDS:-3}
VENV=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st}
STEADY=$BENCH_STEADY_HEAP
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
JOB="$top_srcdir/tests/torch/ddp_job.py"
TJOB="$top_srcdir/tests/realstack/trainer_job.py"
# mpirun_ HEAP ARGS: 2 ranks, GLIBC_TUNABLES=HEAP (empty: glibc's defaults)
mpirun_() {
    local heap=$1; shift
    GLIBC_TUNABLES=$heap timeout 900 "${MPIRUN:-mpirun}" -x GLIBC_TUNABLES --allow-run-as-root --oversubscribe \
        --mca btl self,vader -np 2 "$@" 2>"$tmp/last.err"
}
range() { sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
RUN="$top_builddir/ccshim-run --mpi --summary 0"
# run_ok HEAP ARGS: one run into last.out, or the benchmark ends with its error
run_ok() {
    mpirun_ "$@" >"$tmp/last.out" || { echo "torch-bench: failed: $*" >&2; cat "$tmp/last.err" >&2; exit 1; }
}
# one NAME HEAP ARGS: one run, its step_ms and faults_per_step appended to NAME.ms / NAME.pf
one() {
    local name=$1; shift
    run_ok "$@"
    awk '$1=="step_ms" {print $2}' "$tmp/last.out" >>"$tmp/$name.ms"
    awk '$1=="faults_per_step" {print $2}' "$tmp/last.out" >>"$tmp/$name.pf"
}
# shape NAME ARGS: the ways, alternated, ROUNDS rounds, under both heaps
shape() {
    local name=$1 r; shift
    for r in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        {
            one "$name.d.pm" "" $RUN --desync 0 -- $PY "$JOB" "$@" --mode per-minibatch
            one "$name.d.ns" "" $RUN --desync 0 -- $PY "$JOB" "$@" --mode no_sync
            one "$name.d.nt" "" $RUN --torch -- $PY "$JOB" "$@" --mode no_sync
            one "$name.d.au" "" $RUN --torch --coalesce auto -- $PY "$JOB" "$@" --mode per-minibatch
            one "$name.d.al" "" $RUN --torch --coalesce auto --torch-predict 0 -- $PY "$JOB" "$@" --mode per-minibatch
            one "$name.d.ar" "" $RUN --torch --coalesce auto --torch-ddp-skip 0 -- $PY "$JOB" "$@" --mode per-minibatch
            one "$name.s.ns" "$STEADY" $RUN --desync 0 -- $PY "$JOB" "$@" --mode no_sync
            one "$name.s.nt" "$STEADY" $RUN --torch -- $PY "$JOB" "$@" --mode no_sync
            one "$name.s.au" "$STEADY" $RUN --torch --coalesce auto -- $PY "$JOB" "$@" --mode per-minibatch
        }
    done
}
# row LABEL FILE NS NT: a table row (median and range, faults, ratios to NS and NT)
row() {
    local m
    m=$(bench_median <"$tmp/$2.ms")
    echo "| $1 | $m ms ($(range <"$tmp/$2.ms")) | $(bench_median <"$tmp/$2.pf") | $(bench_ratio "$m" "$3") | $(bench_ratio "$m" "$4") |"
}
rows() { # NAME: the tables' rows, default heap then steady heap
    local n=$1 ns nt sns snt
    ns=$(bench_median <"$tmp/$n.d.ns.ms"); nt=$(bench_median <"$tmp/$n.d.nt.ms")
    sns=$(bench_median <"$tmp/$n.s.ns.ms"); snt=$(bench_median <"$tmp/$n.s.nt.ms")
    echo "glibc's default malloc:"
    echo
    echo "| way | step time | page faults per step (rank 0) | ratio to no_sync | ratio to no_sync under \`--torch\` |"
    echo "| --- | --- | --- | --- | --- |"
    row "per-mini-batch (the job as written)" "$n.d.pm" "$ns" "$nt"
    row "no_sync() on all but the last backward (the code fix), interception only" "$n.d.ns" "$ns" "$nt"
    row "the same under \`--torch\` with desync on (auto's set-up)" "$n.d.nt" "$ns" "$nt"
    row "**per-mini-batch under \`--torch --coalesce auto\`** (DDP skips from step 0, announced by the no-grad forwards)" "$n.d.au" "$ns" "$nt"
    row "the same learning from synchronised steps (\`--torch-predict 0\`: DDP skips from step 2)" "$n.d.al" "$ns" "$nt"
    row "the same with \`--torch-ddp-skip 0\` (ccshim answers locally)" "$n.d.ar" "$ns" "$nt"
    echo
    echo "Steady heap (\`GLIBC_TUNABLES=$STEADY\`):"
    echo
    echo "| way | step time | page faults per step (rank 0) | ratio to no_sync | ratio to no_sync under \`--torch\` |"
    echo "| --- | --- | --- | --- | --- |"
    row "no_sync() on all but the last backward, interception only" "$n.s.ns" "$sns" "$snt"
    row "the same under \`--torch\` with desync on" "$n.s.nt" "$sns" "$snt"
    row "**per-mini-batch under \`--torch --coalesce auto\`**" "$n.s.au" "$sns" "$snt"
    echo "$n: default heap: no_sync $ns, under --torch $nt, auto $(bench_median <"$tmp/$n.d.au.ms") ms; steady heap: no_sync $sns, under --torch $snt, auto $(bench_median <"$tmp/$n.s.au.ms") ms" >&2
}
shape issue --batch 256 --minibatch 8 --steps "$STEPS" --time
shape report --batch 1024 --minibatch 32 --steps "$STEPS" --time

# the helper's own cost per DDP forward against the job's no_sync(), in one
# process each, alternated
FW="$top_srcdir/bench/ddpsync_forward.py"
for r in $(seq 5); do
    OMP_NUM_THREADS=1 $PY "$FW" no_sync | awk '{print $2}' >>"$tmp/fw.ns"
    OMP_NUM_THREADS=1 $RUN --no-mpi --torch --coalesce auto -- $PY "$FW" helper 2>/dev/null |
        awk '$1=="helper" {print $2}' >>"$tmp/fw.h"
done
fw_ns=$(bench_median <"$tmp/fw.ns"); fw_h=$(bench_median <"$tmp/fw.h")
echo "DDP forward: under no_sync() $fw_ns us, through the helper (skipping) $fw_h us" >&2

# sentence-transformers' Trainer, when the real-stack venv is there
st_rows() {
    echo "The real-stack venv ($VENV) is missing: not measured (scripts/realstack-venv.sh makes it)."
}
if [ -x "$VENV/bin/python" ]; then
    for r in $(seq "$ST_ROUNDS"); do
        for w in fix fixt auto; do
            case $w in
            fix) set -- $RUN --desync 0 -- "$VENV/bin/python" "$TJOB" --fix no_sync ;;
            fixt) set -- $RUN --torch -- "$VENV/bin/python" "$TJOB" --fix no_sync ;;
            auto) set -- $RUN --torch --coalesce auto -- "$VENV/bin/python" "$TJOB" ;;
            esac
            run_ok "" "$@" --out "$tmp/st" --steps 8 --batch 64 --mini-batch 8 --time
            awk '$1=="step_ms" {print $2}' "$tmp/last.out" >>"$tmp/st.$w.ms"
        done
    done
    st_rows() {
        local f ft a
        f=$(bench_median <"$tmp/st.fix.ms"); ft=$(bench_median <"$tmp/st.fixt.ms"); a=$(bench_median <"$tmp/st.auto.ms")
        echo "| way | step time | ratio to the fix | ratio to the fix under \`--torch\` |"
        echo "| --- | --- | --- | --- |"
        echo "| the code fix (\`trainer_job.py --fix no_sync\`), interception only | $f ms ($(range <"$tmp/st.fix.ms")) | 1 | $(bench_ratio "$f" "$ft") |"
        echo "| the same under \`--torch\` with desync on | $ft ms ($(range <"$tmp/st.fixt.ms")) | $(bench_ratio "$ft" "$f") | 1 |"
        echo "| **the job as written under \`--torch --coalesce auto\`** | $a ms ($(range <"$tmp/st.auto.ms")) | $(bench_ratio "$a" "$f") | $(bench_ratio "$a" "$ft") |"
        echo "sentence-transformers: fix $f, under --torch $ft, auto $a ms" >&2
    }
fi

doc="$top_srcdir/docs/performance.md"
bench_write_section "$doc" torch-ddp <<MD
## Real PyTorch DDP with a cached loss (bench/torch-bench.sh)

Measured by \`make bench\` on $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, 2 ranks (Open MPI, vader),
every way alternated in each round; median (and range) over the rounds of
each run's median step time of steps 3 on.  Target (the coalescing issue):
the job as written under \`--coalesce auto\` at most 1.05x the code fix.
per-mini-batch and no_sync run under ccshim's interception only, so that the
comm hook's path is the same; no_sync also runs under auto's own set-up
(\`--torch\`, desync on), so that the last column is what coalescing itself
costs.

**Page faults.** Each step of this job allocates and frees 4 MiB tensors
(the in-batch score matrix, its softmax and their gradients).  glibc gives
the top of its heap back to the kernel when more than its trim threshold is
free there, and the next step faults the pages in again: between 1 and 6 of
those tensors per step, depending on where the heap's top lies after the
allocations before it, which differs from run to run and between ways (even
with no ccshim: ~3,700-10,900 faults per step over both ranks measured while
this was found).  At ~1.5 us a fault that is up to ~8 ms of a ~25 ms step.
The second table of each shape fixes glibc's thresholds
(\`GLIBC_TUNABLES\`), which removes those faults: what is left is the ways'
own cost.

### Debian's torch $($PY -c 'import torch; print(torch.__version__)'), tests/torch/ddp_job.py ($STEPS steps, $ROUNDS rounds)

64 backward passes per step, batch 256 per rank, mini-batch 8:

$(rows issue)

The source report's numbers, batch 1024 per rank, mini-batch 32:

$(rows report)

What the helper itself adds (bench/ddpsync_forward.py, one process, the
best of 7 x 5000 forwards of this model, median of 5 alternated runs): a DDP
forward under the job's \`with ddp.no_sync():\` $fw_ns us, the same forward
through the helper's wrapper on its skipping path $fw_h us.

### sentence-transformers' Trainer on torch 2.13 ($ST_ROUNDS rounds)

tests/realstack/trainer_job.py: SentenceTransformerTrainer with
CachedMultipleNegativesRankingLoss, all-MiniLM-L6-v2, batch 64 per rank,
mini-batch 8 (16 backward passes per step), 8 steps.  The code fix is the
one the report's finding recommends: every mini-batch's forward in the
loss's backward hook but the step's last with DDP's synchronisation off.
The Trainer's DDP model has \`find_unused_parameters=True\`; on torch 2.13
the helper's steps need no extra averaging of its gradients
(docs/coalescing.md).

$(st_rows)
MD
echo "updated $doc"
