#!/bin/sh
# st-shapes.sh - issue 41's three shapes of the report's bug on the real
# stack (2 ranks, DDP's buckets through MPI), each under --on-desync abort
# with and without --coalesce auto: a DESYNC naming both ranks and the job
# ended (exit 3) within seconds of it, where the job used to hang until the
# launcher's timeout; and a healthy variant of each with no verdict and
# parameters those of the run without coalescing.
#
# 1. The Trainer with a dict of two datasets and the stack's round-robin
#    batch sampler (trainer_job.py --second-loss): rank 0 trains on the one
#    with CachedMultipleNegativesRankingLoss at every step (16 backward
#    passes), rank 1 on the one with MultipleNegativesRankingLoss (one).
#    Healthy: both datasets with a cached loss.
# 2. dataloader_drop_last=False with 184 rows at batch 16: rank 1's last
#    batch has 8 rows (4 backward passes where rank 0 makes 8), at the end
#    of training, where rank 1 goes on into the Trainer's gloo all_gather.
# 3. The hand-written loop (report_job.py, the stack's CachedLossMixin):
#    rank 1 trains with a plain loss, and training ends in a gloo
#    all_gather_object of the losses.  Healthy: every rank's last batch one
#    mini-batch short (coalescing repairs that step after the ranks agreed).
#    And the loop with a metric after every step over gloo (--metric-rank):
#    rank 1 gathers it (dist.gather) where rank 0 all-reduces it, both in the
#    default group's first call: a DESYNC naming both calls and lines (the
#    torch helper's numbering of gloo calls, docs/desync.md).  Healthy: every
#    rank all-reduces it.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 14
RS_LIMIT=120
# latency NAME: seconds from NAME's first verdict to END, the job's end
latency() {
    local v
    v=$(sed -n 's/^ccshim DESYNC .*\[seen by rank [0-9]*[^]]* wall=\([0-9T:.-]*\)Z .*/\1/p' "$CCS_TMP/$1.err" | sort | head -n 1)
    [ -n "$v" ] || { echo none; return; }
    awk -v a="$(date -u -d "$v" +%s.%N)" -v b="$end" 'BEGIN {printf "%.1f", b - a}'
}
# ended NAME RC: "1" when NAME's job ended with exit 3 within 10 s of its
# first verdict (the report's launcher would have waited 240 s)
ended() {
    local lat
    lat=$(latency "$1")
    echo "# $1: exit $2, the job ended ${lat} s after the first verdict" >&2
    [ "$2" = 3 ] && awk -v l="$lat" 'BEGIN {exit !(l >= 0 && l <= 10)}' && echo 1
}
# verdicts NAME: the DESYNC lines of NAME, less comm ids, seq, times, sites' paths
verdicts() { grep '^ccshim DESYNC' "$CCS_TMP/$1.err"; }
# names_both NAME RE: "1" when one of NAME's DESYNC lines matches RE
names_both() { verdicts "$1" | grep -qE "$2" && echo 1; }
# quiet NAME: the verdict lines of any kind in NAME (0 when healthy)
quiet() { grep -cE '^ccshim (DESYNC|MISMATCH|STRAGGLER|DEAD) ' "$CCS_TMP/$1.err"; }

TJ="--model tiny --batch 64 --mini-batch 8"
# The out-of-step rule: rank 1's plain steps run ahead at the same MPI calls
# (rank 0 is one step behind: the counts' form; or further: the marks' form);
# under coalescing rank 1 waits at its step boundary while rank 0 is blocked
# in the reduction of a later mini-batch.
OOS='ranks out of step: (in step 0 rank 0 issued (at least )?[0-9]+, rank 1 issued [0-9]+|rank 1 marked [0-9]+ steps by seq [0-9]+ where rank 0 is still in step 0)'
BND='rank 1 ended step 0 after [0-9]+ backward passes?( where the others made [0-9]+)?; rank 0 blocked in allreduce'
rs two 2 --on-desync abort -- trainer_job.py --out "$CCS_TMP/two" $TJ --steps 4 --second-loss plain
rc=$?; end=$(date +%s.%N)
tap_eq "two datasets, round-robin, rank 0 cached loss, rank 1 plain: DESYNC naming both ranks out of step, exit 3 within 10 s" \
    "1 1" "$(names_both two "$OOS") $(ended two $rc)"
rs twoauto 2 --on-desync abort --coalesce auto -- trainer_job.py --out "$CCS_TMP/twoauto" $TJ --steps 4 --second-loss plain
rc=$?; end=$(date +%s.%N)
tap_eq "... under --coalesce auto: DESYNC at rank 1's step boundary naming rank 0 blocked, exit 3 within 10 s" \
    "1 1" "$(names_both twoauto "$OOS|$BND") $(ended twoauto $rc)"
rs tworef 2 -- trainer_job.py --out "$CCS_TMP/tworef" $TJ --steps 3 --second-loss cached --save "$CCS_TMP/tworef.npy"
tap_eq "two datasets, both with a cached loss: runs, 3 steps, no verdict" "0 3 0" "$? $(val tworef optimizer_steps) $(quiet tworef)"
rs twook 2 --on-desync abort --coalesce auto -- trainer_job.py --out "$CCS_TMP/twook" $TJ --steps 3 --second-loss cached \
    --ref "$CCS_TMP/tworef.npy"
tap_eq "... under --coalesce auto: runs, no verdict, parameters those of the run without coalescing" \
    "0 0 ranks_equal 1, within 1e-5" "$? $(quiet twook) $(close twook)"

SJ="--model tiny --batch 16 --mini-batch 4 --rows 184 --keep-last"
# Rank 1 ends training and enters the Trainer's gloo all_gather (ccshim's
# torch helper names it) while rank 0 waits in the reduction of its last
# step; under coalescing, rank 1 may also be held at its last step's boundary.
FRN='rank 0 blocked in allreduce\(count=[0-9]+, float32, sum\) at seq [0-9]+ for [0-9.]+ s; rank 1 at seq [0-9]+ \([0-9]+ behind, not in it: in torch.distributed.all_gather \(gloo\) at trainer_pt_utils.py:[0-9]+ in distributed_broadcast_scalars'
SBND='rank 1 ended step 5 after [0-9]+ (all-reduces|backward passes)( where the others made [0-9]+)?; rank 0 blocked in allreduce'
rs short 2 --on-desync abort -- trainer_job.py --out "$CCS_TMP/short" $SJ
rc=$?; end=$(date +%s.%N)
tap_eq "dataloader_drop_last=False, rank 1's last batch short at the end of training: DESYNC naming rank 1 in the gloo all_gather and rank 0, exit 3 within 10 s" \
    "1 1" "$(names_both short "$FRN") $(ended short $rc)"
rs shortauto 2 --on-desync abort --coalesce auto -- trainer_job.py --out "$CCS_TMP/shortauto" $SJ
rc=$?; end=$(date +%s.%N)
tap_eq "... under --coalesce auto: the same, exit 3 within 10 s" \
    "1 1" "$(names_both shortauto "$FRN|$SBND") $(ended shortauto $rc)"

LJ="--dim 32 --steps 6 --gather-loss"
LFRN='rank 1 at seq [0-9]+ \([0-9]+ behind, not in it: in torch.distributed.all_gather_object \(gloo\) at report_job.py:[0-9]+ in main'
rs loop 2 --on-desync abort -- report_job.py $LJ --plain-rank 1
rc=$?; end=$(date +%s.%N)
tap_eq "the hand-written loop, rank 1 with a plain loss, a gloo all_gather_object at the end: DESYNC naming both, exit 3 within 10 s" \
    "1 1" "$(names_both loop "$OOS|$LFRN") $(ended loop $rc)"
rs loopauto 2 --on-desync abort --coalesce auto -- report_job.py $LJ --plain-rank 1
rc=$?; end=$(date +%s.%N)
tap_eq "... under --coalesce auto: DESYNC naming both, exit 3 within 10 s" \
    "1 1" "$(names_both loopauto "$OOS|$LFRN|$BND") $(ended loopauto $rc)"
rs loopref 2 -- report_job.py $LJ --short-last --save "$CCS_TMP/loopref.npy"
tap_eq "the hand-written loop, every rank's last batch short: runs, no verdict" "0 0" "$? $(quiet loopref)"
rs loopok 2 --on-desync abort --coalesce auto -- report_job.py $LJ --short-last --ref "$CCS_TMP/loopref.npy"
tap_eq "... under --coalesce auto: runs, no verdict, parameters those of the run without coalescing" \
    "0 0 ranks_equal 1, within 1e-5" "$? $(quiet loopok) $(close loopok)"
tap_eq "... the short last step repaired once, after the ranks agreed, on each rank" "1 1" \
    "$(grep -c '^ccshim_torch\[0\]: step 5: .*averaged the gradients' "$CCS_TMP/loopok.err") $(grep -c '^ccshim_torch\[1\]: step 5: .*averaged the gradients' "$CCS_TMP/loopok.err")"
tap_eq "... coalescing learned the step and deferred before the short step (some all-reduces answered locally)" 1 \
    "$(grep -cE '^ccshim\[0@[^]]*\]: coalescing: [1-9][0-9]* all-reduces answered locally' "$CCS_TMP/loopok.err")"
MFRN='rank 0 in torch.distributed.all_reduce \(gloo\) at rs_common.py:[0-9]+ in counting_all_reduce \(call 1\) for [0-9.]+ s; rank 1 in torch.distributed.gather \(gloo\) at report_job.py:[0-9]+ in main \(call 1\) for [0-9.]+ s: different collectives at the group.s call 1'
rs metric 2 --on-desync abort -- report_job.py $LJ --metric-rank 1
rc=$?; end=$(date +%s.%N)
tap_eq "the hand-written loop with a gloo metric every step, rank 1 gathering it where rank 0 all-reduces it: DESYNC naming both calls and lines, exit 3 within 10 s" \
    "1 1" "$(names_both metric "$MFRN") $(ended metric $rc)"
rs metricok 2 --on-desync abort -- report_job.py $LJ --metric-rank all
tap_eq "... every rank all-reducing it: runs, no verdict" "0 0" "$? $(quiet metricok)"
tap_done
