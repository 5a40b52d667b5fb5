#!/bin/sh
# tests/trainer/trainer-shim.sh - under the shim, ccshim-audit counts per
# step and rank exactly what the trainer's design says:
#   per-minibatch: (sum over columns of ceil(b/m)) x buckets all-reduces,
#   per-step: buckets all-reduces, the SigLIP ring: W-1 sends and W-1
#   receives, the gathered losses: their all-gathers.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
[ -x "$CCSHIM_RUN" ] || tap_skip_all "ccshim-run not built"
[ -e "$top_builddir/.libs/libccshim-mpi.so" ] || tap_skip_all "libccshim-mpi.so not built"
tap_plan 10
T=$CCS_TMP
n=0

# traced NP ARGS...: runs the trainer under the shim into a fresh trace
# directory $T/tN, its output in $T/tN.out; sets DIR.
traced() {
    local np=$1; shift
    n=$((n + 1)); DIR=$T/t$n
    ccs_mpirun 90 "$np" "$CCSHIM_RUN" --trace-dir "$DIR" -- "$CCSHIM_TRAINER" "$@" >"$DIR.out" 2>"$DIR.err"
}

# per_rank_step KIND: "step rank count;" for every row of KIND, sorted.
per_rank_step() {
    "$CCSHIM_AUDIT" --tsv "$DIR" | awk -F '\t' -v k="$1" '$4 == k { print $1, $2, $5 }' | sort -n | tr '\n' ';'
}

# expect STEPS NP COUNT: "s r COUNT;" for every step s and rank r.
expect() {
    awk -v s="$1" -v w="$2" -v c="$3" 'BEGIN { for (i = 0; i < s; i++) for (r = 0; r < w; r++) printf "%d %d %d;", i, r, c }'
}

ceil_div() { echo $((($1 + $2 - 1) / $2)); }

# 1-3: per-minibatch, 3 columns, 24 rows per rank, mini-batch 5, 2 buckets.
traced 2 --batch 48 --mini-batch 5 --columns 3 --buckets 2 --steps 2
per_step=$((3 * $(ceil_div 24 5) * 2))
tap_eq "per-minibatch: 3 x ceil(24/5) x 2 = $per_step all-reduces per rank per step" \
    "$(expect 2 2 $per_step)" "$(per_rank_step allreduce)"
params=$(tr_json "$DIR.out" params)
bytes=$("$CCSHIM_AUDIT" --tsv "$DIR" | awk -F '\t' '$4 == "allreduce" && $1 == 0 && $2 == 0 { print $6 }')
tap_eq "... each bucket once per backward: $((per_step / 2)) x $params parameters x 8 bytes" \
    "$((per_step / 2 * params * 8))" "$bytes"
tap_eq "... the trainer's own count agrees" "$per_step" "$(tr_json "$DIR.out" reductions_per_step)"

# 4: the fix, per-step: one reduction per bucket.
traced 2 --batch 48 --mini-batch 5 --columns 3 --buckets 2 --steps 2 --sync per-step
tap_eq "per-step: 2 all-reduces (one per bucket) per rank per step" "$(expect 2 2 2)" "$(per_rank_step allreduce)"

# 5-6: the first seed document's numbers on 4 ranks: 1024 rows per rank,
# mini-batch 32, 2 columns, one bucket: 64 reductions per step against 1.
traced 4 --local-batch 1024 --mini-batch 32 --columns 2 --steps 2
tap_eq "B=1024 m=32 2 columns: 64 all-reduces per rank per step" "$(expect 2 4 64)" "$(per_rank_step allreduce)"
traced 4 --local-batch 1024 --mini-batch 32 --columns 2 --steps 2 --sync per-step
tap_eq "... and 1 with per-step sync" "$(expect 2 4 1)" "$(per_rank_step allreduce)"

# 7-9: the SigLIP ring: W-1 sends and W-1 receives per rank per step.
traced 3 --batch 48 --mini-batch 5 --loss siglip-ring --sync per-step --steps 2
tap_eq "siglip-ring on 3 ranks: 2 sends per rank per step" "$(expect 2 3 2)" "$(per_rank_step send)"
tap_eq "... and 2 receives" "$(expect 2 3 2)" "$(per_rank_step recv)"
traced 3 --batch 48 --mini-batch 5 --loss siglip-gather --sync per-step --steps 2
tap_eq "siglip-gather on 3 ranks: 1 all-gather per rank per step, no point-to-point" "$(expect 2 3 1);" \
    "$(per_rank_step allgather);$(per_rank_step send)$(per_rank_step recv)"

# 10: the gathered InfoNCE: one all-gather per column.
traced 2 --batch 48 --mini-batch 5 --columns 3 --loss mnrl-gather --sync per-step --steps 2
tap_eq "mnrl-gather, 3 columns: 3 all-gathers per rank per step" "$(expect 2 2 3)" "$(per_rank_step allgather)"
tap_done
