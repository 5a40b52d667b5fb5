#!/bin/sh
# bench/torch2-report-bench.sh - the coalescing issue's target on the source
# report's numbers (batch 1024 per rank, mini-batch 32, 2 columns: 64
# backward passes per step) on the source report's torch: the real-stack
# venv's torch 2.13 from PyPI, where bench/torch-bench.sh measures this shape
# on Debian's torch 1.13.  tests/torch/ddp_job.py, 2 ranks, DDP's buckets
# all-reduced through MPI by a comm hook.  Three ways:
#   no_sync   the code fix, under ccshim's interception only
#   no_sync   the same under auto's set-up (--torch, desync on)
#   auto      the job as written (per-mini-batch) under --torch --coalesce auto
# each under glibc's default malloc (what the report's users run) and under a
# steady heap (GLIBC_TUNABLES fixing the trim and mmap thresholds, as
# bench/torch-bench.sh does: the 4 MiB loss tensors' page faults taken out),
# all six alternated in each round.  Each run's median step time of steps 3
# on; per way the median over the rounds, and the median of the rounds' own
# ratios (which cancels what a round shares: this machine's speed then).
# Writes docs/performance.md's section "torch2-report".
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
VENV=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st}
PY=$VENV/bin/python
if ! [ -x "$PY" ] || ! "$PY" -c 'import torch, mpi4py' 2>/dev/null; then
    echo "torch2-report-bench: skipped (the real-stack venv $VENV with torch and mpi4py is missing;" \
        "scripts/realstack-venv.sh makes it)"
    exit 0
fi
ROUNDS=${ROUNDS:-10}
STEPS=${STEPS:-30}
[ "$STEPS" -gt 3 ] || { echo "torch2-report-bench: STEPS must be above 3 (steps 3 on are timed), not $STEPS" >&2; exit 1; }
JOB="$top_srcdir/tests/torch/ddp_job.py"
RUN="$top_builddir/ccshim-run --mpi --summary 0"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
STEADY=$BENCH_STEADY_HEAP
# one WAY HEAP ARGS: one run under GLIBC_TUNABLES=HEAP (empty: glibc's
# defaults); its step_ms and faults_per_step appended to WAY.ms / WAY.pf
one() {
    local way=$1 heap=$2; shift 2
    GLIBC_TUNABLES=$heap bench_mpirun2 -x GLIBC_TUNABLES "$@" --batch 1024 --minibatch 32 --steps "$STEPS" --time \
        >"$tmp/last.out" 2>"$tmp/last.err" ||
        { echo "torch2-report-bench: failed: $*" >&2; cat "$tmp/last.err" >&2; exit 1; }
    grep -q '^ranks_equal 1$' "$tmp/last.out" ||
        { echo "torch2-report-bench: the ranks' parameters differ after: $*" >&2; exit 1; }
    awk '$1=="step_ms" {print $2}' "$tmp/last.out" >>"$tmp/$way.ms"
    awk '$1=="faults_per_step" {print $2}' "$tmp/last.out" >>"$tmp/$way.pf"
}
for _ in $(seq "$ROUNDS"); do
    for h in d s; do
        heap=; [ $h = d ] || heap=$STEADY
        # shellcheck disable=SC2086
        {
            one $h.ns "$heap" $RUN --desync 0 -- "$PY" "$JOB" --mode no_sync
            one $h.nt "$heap" $RUN --torch -- "$PY" "$JOB" --mode no_sync
            one $h.au "$heap" $RUN --torch --coalesce auto -- "$PY" "$JOB" --mode per-minibatch
        }
    done
done
for w in d.ns d.nt d.au s.ns s.nt s.au; do
    [ "$(wc -l <"$tmp/$w.ms")" -eq "$ROUNDS" ] && [ "$(wc -l <"$tmp/$w.pf")" -eq "$ROUNDS" ] ||
        { echo "torch2-report-bench: a run of $w printed no step_ms or faults_per_step" >&2; exit 1; }
done
# per_round A B: the median of the rounds' own ratios A/B
per_round() { bench_round_ratios "$tmp/$2.ms" "$tmp/$1.ms" | bench_median | awk '{printf "%.3f", $1}'; }
# table H: the three ways' rows under heap H (d or s)
table() {
    local h=$1 ns nt w m
    ns=$(bench_median <"$tmp/$h.ns.ms"); nt=$(bench_median <"$tmp/$h.nt.ms")
    echo "| way | step time | page faults per step (rank 0) | ratio to no_sync | ratio to no_sync under \`--torch\` |"
    echo "| --- | --- | --- | --- | --- |"
    for w in ns nt au; do
        m=$(bench_median <"$tmp/$h.$w.ms")
        case $w in
        ns) label="no_sync() on all but the last backward (the code fix), interception only" ;;
        nt) label="the same under \`--torch\` with desync on (auto's set-up)" ;;
        au) label="**per-mini-batch under \`--torch --coalesce auto\`** (DDP skips from step 0, announced)" ;;
        esac
        echo "| $label | $m ms ($(bench_range "$tmp/$h.$w.ms")) | $(bench_median <"$tmp/$h.$w.pf") ($(bench_range "$tmp/$h.$w.pf")) |" \
            "$(bench_ratio "$m" "$ns") / $(per_round $h.$w $h.ns) | $(bench_ratio "$m" "$nt") / $(per_round $h.$w $h.nt) |"
    done
    echo "torch 2.13, report shape, heap $h: no_sync $ns, under --torch $nt, auto $(bench_median <"$tmp/$h.au.ms") ms;" \
        "auto per round: $(per_round $h.au $h.ns) of no_sync, $(per_round $h.au $h.nt) under --torch" >&2
}

bench_write_section "$top_srcdir/docs/performance.md" torch2-report <<MD
### The source report's numbers on the source report's torch (bench/torch2-report-bench.sh)

Measured by \`make bench\` on $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores ($(bench_cpu)): tests/torch/ddp_job.py on
torch $("$PY" -c 'import torch; print(torch.__version__)') from PyPI (the real-stack venv), the source report's numbers (batch
1024 per rank, mini-batch 32, 64 backward passes per step), 2 ranks, DDP's buckets through an
mpi4py comm hook, $STEPS steps, $ROUNDS rounds with the three ways under both heaps alternated in
each.  Each run's median step time of steps 3 on; medians over the rounds (range in brackets).
A ratio is given twice: the ratio of the medians / the median of the rounds' own ratios (which
cancels what a round shares: this machine's speed at the time).  Every run ended with the
ranks' parameters bitwise equal.

glibc's default malloc (what the report's users run):

$(table d)

Steady heap (\`GLIBC_TUNABLES=$STEADY\`):

$(table s)
MD
