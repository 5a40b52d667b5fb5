#!/bin/sh
# bench/coalesce-bench.sh - step time of the reference trainer on 4 ranks over
# the TCP loopback transport (so that communication dominates), 64 bucket
# reductions per step with --sync per-minibatch (as in the first source
# document), in two configurations of the default small model:
#   A  32 rows per rank in mini-batches of 1: almost nothing but communication
#   B  128 rows per rank in mini-batches of 4: some computation per mini-batch
# and four variants each:
#   per-step                   one reduction per bucket per step (the fix)
#   per-minibatch              64 reductions per step, no coalescing
#   per-minibatch + every:64   coalesced, N from the formula
#   per-minibatch + auto       coalesced, N learned (2 learning steps)
# Runs alternate (ABCD ABCD ...) so drift hits every variant alike; a run's
# step time is the mean over its steps after the first 3 (auto's learning
# steps and warm-up excluded); a figure is the median over TRIALS runs.
# Writes docs/performance.md between <!-- BEGIN coalesce --> and its END.
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
TRIALS=${TRIALS:-5}
STEPS=${STEPS:-23}
NP=4
trainer="$top_builddir/ccshim-trainer"
[ -x "$trainer" ] || { echo "coalesce-bench: ccshim-trainer not built; skipped"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
OPENBLAS_NUM_THREADS=1; export OPENBLAS_NUM_THREADS

run() { # OUT-FILE TRAINER-ARGS SHIM-SETTINGS...
    run_out=$1 run_args=$2; shift 2
    # shellcheck disable=SC2086
    timeout 300 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --mca btl self,tcp \
        --mca mpi_yield_when_idle 1 -np $NP "$top_builddir/ccshim-run" --summary 0 "$@" -- "$trainer" $run_args \
        2> "$tmp/err" | awk '/^step/ && $2 >= 3 { s += $NF; n++ } END { printf "%.4f\n", s / n }' >> "$tmp/$run_out"
}

rows=""
for cfg in "A 128 1" "B 512 4"; do
    set -- $cfg
    name=$1 batch=$2 mb=$3
    N=$((2 * ((batch / NP + mb - 1) / mb)))
    args="--steps $STEPS --batch $batch --mini-batch $mb --columns 2 --loss mnrl"
    for t in $(seq "$TRIALS"); do
        run "$name.step" "$args --sync per-step"
        run "$name.mb" "$args --sync per-minibatch"
        run "$name.every" "$args --sync per-minibatch" --coalesce every:$N
        run "$name.auto" "$args --sync per-minibatch" --coalesce auto
    done
    step=$(bench_median < "$tmp/$name.step"); mb_t=$(bench_median < "$tmp/$name.mb")
    every=$(bench_median < "$tmp/$name.every"); auto=$(bench_median < "$tmp/$name.auto")
    echo "coalesce-bench $name ($args): step time (ms, median of $TRIALS): per-step $step," \
        "per-minibatch $mb_t, every:$N $every, auto $auto"
    echo "  every:$N / per-step $(bench_ratio "$every" "$step"), per-minibatch / every:$N $(bench_ratio "$mb_t" "$every")," \
        "auto / per-step $(bench_ratio "$auto" "$step"), per-minibatch / auto $(bench_ratio "$mb_t" "$auto")"
    rows="$rows
| $name | --sync per-step | 1 | $step ms | 1.000 | $(bench_ratio "$mb_t" "$step") |
| $name | --sync per-minibatch | $N | $mb_t ms | $(bench_ratio "$mb_t" "$step") | 1.000 |
| $name | --sync per-minibatch, CCSHIM_COALESCE=every:$N | 1 real + $((N - 1)) deferred | $every ms | $(bench_ratio "$every" "$step") | $(bench_ratio "$mb_t" "$every") |
| $name | --sync per-minibatch, CCSHIM_COALESCE=auto | 1 real + $((N - 1)) deferred | $auto ms | $(bench_ratio "$auto" "$step") | $(bench_ratio "$mb_t" "$auto") |"
done

doc="$top_srcdir/docs/performance.md"
cpu=$(bench_cpu)
bench_write_section "$doc" coalesce <<MD
## Coalescing per-mini-batch all-reduces

Measured by \`make bench\` (bench/coalesce-bench.sh) on $(date -u +%Y-%m-%d), $(nproc) cores ($cpu),
Open MPI $(mpirun --version 2>/dev/null | awk 'NR==1 {print $NF}'), $NP ranks over the TCP loopback transport
(so that communication dominates), ccshim-trainer with the default small model (3152
parameters, one bucket), loss mnrl, 2 columns, $STEPS steps:
A: \`--batch 128 --mini-batch 1\` (32 rows per rank, one per mini-batch);
B: \`--batch 512 --mini-batch 4\` (128 rows per rank, four per mini-batch);
both 64 bucket reductions per step with --sync per-minibatch.  Step time: mean over steps 3
and later of one run (auto's learning steps excluded), median of $TRIALS alternated runs.

| config | variant | reductions per step | step time | against per-step | per-minibatch against it |
| --- | --- | --- | --- | --- | --- |$rows

Targets: coalesced within 5% of per-step (at most 1.05), and at least 5 times faster than
per-minibatch without it.  What remains between coalesced per-minibatch and per-step is
work coalescing cannot remove: the job's own filling of each bucket (grad / W) and copying
it back after every mini-batch, as DDP does, plus the local answer (one multiplication per
element) and the record of each deferred call.  That is about three passes over the bucket
per mini-batch; per-step does none (a profile of A on one rank: the trainer's bucket fill
and copy-back 9.3% of the time, ccshim's local answer 1.6%, its bookkeeping below 0.5%).
Where communication dominates most (A) those passes
weigh most against the little computation; with more computation per mini-batch (B) they
vanish against it but communication dominates less.  On this shared 2-core machine running
4 ranks, figures move by tens of percent between runs.
MD
echo "updated $doc"
