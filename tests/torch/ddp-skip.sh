#!/bin/sh
# ddp-skip.sh - coalescing as DDP's own no_sync (tools/python/ccshim_ddpsync.py):
# under `ccshim-run --torch --coalesce auto`, DDP skips the synchronisation
# of all but the N-th backward of each step: from the first step when the
# ranks agree that their no-grad forwards (the cached embedding) announced N
# backward passes, else once ccshim agreed N bucket reductions per step.
# Real DDP (torch 1.13, CPU, 16 backward passes per step): announced, one
# real reduction per step from step 0 and the parameters of the job's own
# no_sync() to the bit; announced wrong (probe forwards without grad, an
# extra mini-batch in the first step): averaged, then learned; learned
# (--torch-predict 0): exactly one real reduction per bucket per step from
# step 3 (flagged `helper`, nothing answered locally), the closing line says
# which mechanism avoided them, and the parameters are bitwise equal across
# ranks and within 1e-5 of the per-mini-batch run's in every case: several
# buckets with DDP's rebuild, a short last batch (averaged before the step, then learned again),
# a wrong every:N (the helper stays out, ccshim repairs), AdamW with two
# optimizers and schedulers, gradient accumulation under the job's own
# no_sync, gradient_as_bucket_view on 4 ranks, find_unused_parameters,
# GradScaler with a deep-copied optimizer, step(closure); static_graph is
# left to ccshim's all-reduce-level coalescing.  Last, with no ccshim,
# ddp_job's --first K --first-way that bench/ddp-heap-bench.sh compares.
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 40
J="--batch 64 --minibatch 8 --steps 6"
# engaged NAME [WANT]: how many ranks said the helper engaged from the first
# step (its no-grad forwards announced 16 backward passes); when WANT is
# given and the count differs, the job's own lines go to the log (stderr)
# so that a failure says why (the verdicts, the helper's and ccshim's lines)
engaged() { engaged_by "DDP synchronises once per step from the first step (at the 16-th backward)" "$@"; }
# learned NAME [WANT]: the same for the helper engaging once ccshim learned
# the pattern from synchronised steps
learned() { engaged_by "DDP now synchronises once per step (at the 16-th backward)" "$@"; }
engaged_by() {
    local n msg=$1
    shift
    n=$(grep -c "$msg" "$CCS_TMP/$1.err")
    if [ -n "${2:-}" ] && [ "$n" != "$2" ]; then
        grep -E '^ccshim|ccshim_torch' "$CCS_TMP/$1.err" | tail -n 30 | sed "s/^/# $1: /" >&2
        "$CCSHIM_AUDIT" "$CCS_TMP/$1.tr" 2>&1 | tail -n 20 | sed "s/^/# $1 audit: /" >&2
    fi
    echo "$n"
}
helper_rows() { # NAME [FIRST]: "step rank real" of the helper-flagged reductions, steps >= FIRST (3)
    "$CCSHIM_AUDIT" --tsv-records "$CCS_TMP/$1.tr" 2>/dev/null | awk -F'\t' -v f="${2:-3}" '
        !/^#/ && $4=="allreduce" && $11 ~ /helper/ && $10 >= f { n[$10" "$1]++ }
        END { for (k in n) print k, n[k] }' | sort -n -k1 -k2 | tr '\n' ';'
}
expect_helper() { # FIRST LAST NP PER
    local s r
    for s in $(seq "$1" "$2"); do for r in $(seq 0 $(($3 - 1))); do printf '%s %s %s;' "$s" "$r" "$4"; done; done
}

# The first step announced by its no-grad forwards (the cached embedding):
# DDP skips from step 0, as the job's own no_sync() would, to the bit.
ddp ref1 2 -- $J --save "$CCS_TMP/ref1.npy"
ddp nsref 2 -- $J --mode no_sync
ddp ann 2 --coalesce auto -- $J --ref "$CCS_TMP/ref1.npy"
tap_eq "auto: runs, the helper engaged from the first step on every rank (16 no-grad forwards announced 16 backward passes)" \
    "0 2" "$? $(engaged ann 2)"
tap_eq "... from step 0 exactly one real reduction per step, flagged helper; nothing answered locally" \
    "$(expect_helper 0 5 2 1) $(expect_steps 0 5 2 1 0 | tr '\n' ';')" "$(helper_rows ann 0) $(per_step ann | tr '\n' ';')"
tap_eq "... parameters: bitwise those of the job's own no_sync() run, equal across ranks, within 1e-5 of per-mini-batch" \
    "$(val nsref digest) ranks_equal 1, within 1e-5" "$(val ann digest) $(close ann)"
tap_check "... the closing line counts 15 x 6 steps avoided by the torch helper" \
    grep -q "coalescing: .* 90 of them avoided by the torch helper" "$CCS_TMP/ann.err"

# SGD written by hand, no torch.optim optimizer: no step is marked, so DDP
# must not skip from the first step (nothing would reduce the step's sums).
ddp href 2 -- $J --opt by-hand
ddp hand 2 --coalesce auto -- $J --opt by-hand
tap_eq "an optimizer written by hand (no step marked): the helper stays out, the parameters of the run without ccshim to the bit" \
    "0 0 0 $(val href digest)" "$? $(engaged hand) $(learned hand) $(val hand digest)"

# DDP's buckets through gloo (no comm hook): ccshim sees none of them, so its
# side channel could not compare later steps' counts; after the announced
# first step DDP synchronises every backward again, as written.
ddp glref 2 -- $J --gloo-buckets --save "$CCS_TMP/gloo.npy"
ddp gloo 2 --coalesce auto -- $J --gloo-buckets --ref "$CCS_TMP/gloo.npy"
tap_eq "DDP's buckets through gloo (not intercepted): announced, then DDP synchronises every backward again after step 0; parameters" \
    "0 2 2 ranks_equal 1, within 1e-5" \
    "$? $(engaged gloo) $(grep -c "ccshim's coalescing saw none of the first step's all-reduces (DDP's buckets go through a backend ccshim does not intercept, its process group's being gloo" "$CCS_TMP/gloo.err") $(close gloo)"

ddp ref 2 -- $J $BUCKETS --save "$CCS_TMP/ref.npy"
B=$(val ref buckets)
ddp annb 2 --coalesce auto -- $J $BUCKETS --ref "$CCS_TMP/ref.npy"
tap_eq "auto, announced, $B buckets (DDP rebuilds them at step 1's first forward): from step 1 one real reduction per bucket per step" \
    "0 2 $(expect_helper 1 5 2 "$B")" "$? $(engaged annb 2) $(helper_rows annb 1)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close annb)"

# Learned from synchronised steps (--torch-predict 0): steps 0-1 as written.
ddp auto 2 --coalesce auto --torch-predict 0 -- $J $BUCKETS --ref "$CCS_TMP/ref.npy"
tap_eq "auto learning from synchronised steps (--torch-predict 0), $B buckets with DDP's rebuild: runs, the helper engaged on every rank" \
    "0 2" "$? $(learned auto 2)"
tap_eq "... from step 3 exactly one real reduction per bucket per step, flagged helper" \
    "$(expect_helper 3 5 2 "$B")" "$(helper_rows auto)"
tap_eq "... nothing answered locally from step 3 (DDP skipped 15 of 16 synchronisations)" \
    "$(expect_steps 3 5 2 "$B" 0)" "$(per_step auto 3)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close auto)"
tap_check "... the closing line counts them as avoided by the torch helper (15 x $B x 3 steps)" \
    grep -q "coalescing: .* $((15 * B * 3)) of them avoided by the torch helper" "$CCS_TMP/auto.err"
tap_check "... and the audit names the mechanism" \
    sh -c "'$CCSHIM_AUDIT' '$CCS_TMP/auto.tr' | grep -q 'coalescing by DDP itself in steps 3-5'"

ddp sref 2 -- $J --last-batch 40 --save "$CCS_TMP/sref.npy"
ddp short 2 --coalesce auto -- $J --last-batch 40 --ref "$CCS_TMP/sref.npy"
tap_eq "short last batch (10 backward passes in step 5): runs" 0 $?
tap_check "... averaged before the last step, then learned again" \
    grep -q "ccshim_torch\[[01]\]: step 5: DDP skipped the synchronisation of the step's last backward pass" "$CCS_TMP/short.err"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close short)"


# Announced wrong: 3 probe forwards without grad before each step's
# embedding announce 19; the first step ends after 16, unsynchronised on
# every rank: they compare counts over the group, average, learn again.
ddp probe 2 --coalesce auto -- $J --probe-forwards 3 --ref "$CCS_TMP/ref1.npy"
tap_eq "3 probe forwards announce 19 backward passes, the first step makes 16: runs, no verdict, averaged, then learned" \
    "0 0 1 2" "$? $(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/probe.err") $(grep -c "ccshim_torch\[0\]: step 0: DDP skipped the synchronisation" "$CCS_TMP/probe.err") $(learned probe)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close probe)"
ddp xref0 2 -- $J --extra-rank -2 --extra-step 0 --save "$CCS_TMP/xref0.npy"
ddp xtra0 2 --coalesce auto -- $J --extra-rank -2 --extra-step 0 --ref "$CCS_TMP/xref0.npy"
tap_eq "an extra mini-batch on every rank in the first step (17, 16 announced): runs, no verdict, averaged, parameters" \
    "0 0 1 ranks_equal 1, within 1e-5" \
    "$? $(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/xtra0.err") $(grep -c "ccshim_torch\[0\]: step 0: DDP skipped the synchronisation" "$CCS_TMP/xtra0.err") $(close xtra0)"

ddp xref 2 -- $J --extra-rank -2 --extra-step 4 --save "$CCS_TMP/xref.npy"
ddp xtra 2 --coalesce auto -- $J --extra-rank -2 --extra-step 4 --ref "$CCS_TMP/xref.npy"
tap_eq "an extra mini-batch on every rank in step 4 (17 backward passes): runs, no verdict" "0 0" \
    "$? $(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/xtra.err")"
tap_eq "... averaged before the step (the 17th skipped its synchronisation), parameters" \
    "1 ranks_equal 1, within 1e-5" \
    "$(grep -c "ccshim_torch\[0\]: step 4: DDP skipped the synchronisation" "$CCS_TMP/xtra.err") $(close xtra)"

ddp ev16 2 --coalesce every:16 -- $J --ref "$CCS_TMP/ref1.npy"
tap_eq "every:16, as announced: DDP skips from the first step, one real reduction per step from step 0; parameters" \
    "0 2 $(expect_helper 0 5 2 1) ranks_equal 1, within 1e-5" "$? $(engaged ev16) $(helper_rows ev16 0) $(close ev16)"
ddp ev5 2 --coalesce every:5 -- $J --ref "$CCS_TMP/ref1.npy"
tap_eq "every:5 on 16 per step: runs, the helper stays out (its count is not the step's)" "0 0 0" \
    "$? $(engaged ev5) $(learned ev5)"
tap_eq "... ccshim's repairs keep the parameters" "ranks_equal 1, within 1e-5" "$(close ev5)"

ddp aref 2 -- $J --opt adamw --two-opt --sched --save "$CCS_TMP/aref.npy"
ddp adam 2 --coalesce auto -- $J --opt adamw --two-opt --sched --ref "$CCS_TMP/aref.npy"
# (Learned, the helper once stayed out here in a clean-clone run, ccshim's
# all-reduce-level coalescing doing the work, not understood; announced, it
# engages from the first step, which does not depend on that learning.)
tap_eq "two AdamW optimizers with schedulers: runs, the helper engaged from the first step" "0 2" "$? $(engaged adam 2)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close adam)"

ddp accref 2 -- $J --accum 2 --save "$CCS_TMP/accref.npy"
ddp acc 2 --coalesce auto -- $J --accum 2 --ref "$CCS_TMP/accref.npy"
tap_eq "gradient accumulation (2 passes, the first under the job's no_sync): runs, helper engaged" "0 2" \
    "$? $(engaged acc 2)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close acc)"

ddp vref 4 -- $J --grad-as-bucket-view --save "$CCS_TMP/vref.npy"
ddp view 4 --coalesce auto -- $J --grad-as-bucket-view --ref "$CCS_TMP/vref.npy"
tap_eq "gradient_as_bucket_view, 4 ranks: runs, helper engaged" "0 4" "$? $(engaged view 4)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close view)"

ddp uref 2 -- $J --find-unused --save "$CCS_TMP/uref.npy"
ddp unused 2 --coalesce auto -- $J --find-unused --ref "$CCS_TMP/uref.npy"
tap_eq "find_unused_parameters=True: runs, helper engaged" "0 2" "$? $(engaged unused 2)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close unused)"
# ccshim_torch averages such a model's .grad before each step it coalesced
# itself (steps 0-1); in the helper's steps only where DDP's no_sync() is not
# exact with unused parameters (torch < 2.13, UNUSED_MAP_KEPT_SINCE)
avg=$("$TORCH_PY" -c 'import torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); print(2 if v >= (2, 13) else 6)')
tap_eq "... gradient averagings through torch.distributed (torch $("$TORCH_PY" -c 'import torch; print(torch.__version__)'))" \
    "$avg" "$(val unused dist_all_reduces)"

ddp gref 2 -- $J --scaler --deepcopy --save "$CCS_TMP/gref.npy"
ddp scaler 2 --coalesce auto -- $J --scaler --deepcopy --ref "$CCS_TMP/gref.npy"
tap_eq "GradScaler with a deep-copied optimizer: runs, helper engaged" "0 2" "$? $(engaged scaler 2)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close scaler)"

ddp cref 2 -- $J --closure --save "$CCS_TMP/cref.npy"
ddp clos 2 --coalesce auto -- $J --closure --ref "$CCS_TMP/cref.npy"
tap_eq "step(closure): runs, helper engaged, parameters, no verdict" "0 2 ranks_equal 1, within 1e-5 0" \
    "$? $(engaged clos 2) $(close clos) $(grep -c '^ccshim \(DESYNC\|STRAGGLER\|DEAD\|MISMATCH\)' "$CCS_TMP/clos.err")"

ddp stref 2 -- $J --static-graph --save "$CCS_TMP/stref.npy"
ddp static 2 --coalesce auto -- $J --static-graph --ref "$CCS_TMP/stref.npy"
tap_eq "static_graph=True: the helper stays out, ccshim coalesces the all-reduces" "0 0 0" \
    "$? $(engaged static) $(learned static)"
tap_eq "... parameters" "ranks_equal 1, within 1e-5" "$(close static)"

# bench/ddp-heap-bench.sh's ways, with no ccshim: first steps that
# synchronise no backward (the comm hook never runs in them) and average
# the gradients once before the optimizer step give no_sync()'s parameters
# to the bit; first steps synchronised on every backward run the hook 16
# times per bucket a step and round differently; only each first step's
# first backward synchronised runs it once a step, step 0 as no_sync then
# step 1 on every backward 1 + 16 times; every way ends with the ranks equal
B1=$(val nsref buckets)
first_ways=""
for w in local per-minibatch first-synced late-synced; do
    ddp "first-$w" 2 -- $J --mode no_sync --first 2 --first-way "$w"
    first_ways="$first_ways $w:$?:$(val "first-$w" first_hook_calls):$(val "first-$w" ranks_equal)"
done
same_pm=$([ -n "$(val first-per-minibatch digest)" ] &&
    [ "$(val first-per-minibatch digest)" = "$(val nsref digest)" ] && echo same || echo differs)
tap_eq "ddp_job --first 2: local first steps give no_sync's parameters bitwise, per-mini-batch ones do not; the hook's calls" \
    " local:0:0:1 per-minibatch:0:$((32 * B1)):1 first-synced:0:$((2 * B1)):1 late-synced:0:$((17 * B1)):1 $(val nsref digest) differs" \
    "$first_ways $(val first-local digest) $same_pm"
tap_done
