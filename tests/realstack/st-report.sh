#!/bin/sh
# st-report.sh - the source report reproduced with the real library:
# sentence-transformers 6.0.1's CachedLossMixin and torch 2.13 (the tier's
# virtual environment), the report's TinyModel and TinyCachedLoss, 16 rows,
# mini-batch 4, 2 columns, on 2 ranks of a gloo group whose DDP bucket goes
# through MPI (tests/realstack/report_job.py).  Counted by ccshim-audit from
# the traces: 8 all-reduces of the bucket per step on every rank, each from
# gradcache.py's surrogate.backward() line.  The report's Linear(4, 4) (an
# 80-byte bucket) for 3 steps, then Linear(32, 32) (4224 bytes: above
# ccshim-audit's 1 KiB threshold for coalescible reductions) for 3 more, whose
# finding names that line and recommends no_sync().  Without ccshim the job's
# own comm hook count (the report's) is 8 per step too.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 7
GC=$("$RS_PY" -c 'import inspect, sentence_transformers.base.losses.gradcache as g
src, first = inspect.getsourcelines(g._backward_hook)
print([first + i for i, l in enumerate(src) if "surrogate.backward()" in l][0])' 2>/dev/null)
echo "# gradcache.py: surrogate.backward() at line ${GC:-?}"

rs plain 2 --plain -- report_job.py --steps 3 --dim 4,32
tap_eq "without ccshim: runs, the report's count (comm hook calls per step, rank 0)" \
    "0 DDP all-reduce dispatched per step (comm hook, rank 0): 8 8 8 8 8 8" \
    "$? $(grep '^DDP all-reduce dispatched' "$CCS_TMP/plain.out")"

rs report 2 -- report_job.py --steps 3 --dim 4,32
tap_eq "under ccshim-run --torch: runs, ranks equal, the same parameters as without" \
    "0 1 $(val plain digest)" "$? $(val report ranks_equal) $(val report digest)"
tap_eq "ccshim-audit: 8 all-reduces of the bucket per step on each rank, all real, 6 steps" \
    "$(expect_steps 0 5 2 8 0)" "$(per_step report)"
"$CCSHIM_AUDIT" "$CCS_TMP/report.tr" 2>&1 | tr -s ' \n' ' ' > "$CCS_TMP/audit.txt"
tap_eq "ccshim-audit: every all-reduce comes from gradcache.py:$GC (both ranks, 6 steps)" \
    "96 gradcache.py:$GC in _backward_hook" "$(py_site_calls report)"
# (7 to 8: DDP rebuilds its bucket after the model's first backward, into a
# new buffer unless the allocator hands the freed one back)
tap_check "the finding (Linear(32, 32)): the same buffer reduced 8 times per step" \
    grep -q 'allreduce reduces the same buffer \(7 to \)\?8 times per step' "$CCS_TMP/audit.txt"
tap_check "  ... names gradcache.py's backward line and recommends no_sync()" \
    grep -q "wrap the backward at gradcache.py:$GC in _backward_hook in DDP's no_sync()" "$CCS_TMP/audit.txt"
tap_eq "the job's comm hook saw as many as ccshim (8 per step on both ranks)" \
    "8,8,8,8,8,8;8,8,8,8,8,8" "$(val report hook_calls_all_ranks)"
tap_done
