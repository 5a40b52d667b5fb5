#!/bin/sh
# coalesce-trainer.sh - acceptance of coalescing with the reference trainer
# (MPI backend): --sync per-minibatch under CCSHIM_COALESCE=auto, and under
# every:N with N from the formula (columns x ceil(local batch / mini-batch)),
# ends 10 steps with the gradients and parameters of --sync per-step, within
# 1e-12 relative in double and 1e-5 in single, on 2 and 4 ranks, for the
# losses mnrl, mnrl-gather and siglip-ring (each on both), with one bucket
# and several (precisions and bucket counts spread over the six runs);
# ccshim-audit shows one real reduction per bucket per step once coalescing
# is on, and a shorter last step is reported.
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "built without MPI"
[ -x "$CCSHIM_TRAINER" ] || tap_skip_all "ccshim-trainer not built"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 17

STEPS=10 BATCH=256 MB=32 COLS=2
# relerr REF GOT: "grad E param E", the largest difference over the largest magnitude
relerr() {
    paste "$1" "$2" | awk '!/^#/ { d = $3 - $6; if (d < 0) d = -d; a = $3 < 0 ? -$3 : $3;
        if (d > md[$1]) md[$1] = d; if (a > ma[$1]) ma[$1] = a }
        END { printf "grad %.3e param %.3e", md["grad"] / ma["grad"], md["param"] / ma["param"] }'
}
within() { echo "$1" | awk -v t="$2" '{ exit !($2 <= t && $4 <= t && NF == 4) }'; }
trainer() { # NAME NP SHIM-SETTINGS... -- TRAINER-ARGS...
    name=$1 np=$2; shift 2
    sets=""
    while [ "$1" != "--" ]; do sets="$sets $1"; shift; done
    shift
    # shellcheck disable=SC2086
    ccs_mpirun 120 "$np" "$CCSHIM_RUN" --trace-dir "$CCS_TMP/$name.tr" $sets -- "$CCSHIM_TRAINER" \
        --steps $STEPS --batch $BATCH --mini-batch $MB --columns $COLS --dump-grad "$CCS_TMP/$name.dump" "$@" \
        > "$CCS_TMP/$name.out" 2> "$CCS_TMP/$name.err"
}
# per_step NAME: "step rank real deferred" for the float sum all-reduces (the buckets)
per_step() {
    "$CCSHIM_AUDIT" --tsv-records "$CCS_TMP/$1.tr" 2>/dev/null | awk -F'\t' '
        !/^#/ && $4=="allreduce" && $6 ~ /float/ && $7=="sum" && $5 > 1 {
            k = $10" "$1; if ($11 ~ /deferred/) d[k]++; else r[k]++; s[k] = 1 }
        END { for (k in s) printf "%s %d %d\n", k, r[k], d[k] }' | sort -n -k1,1 -k2,2
}
expect_steps() { # NP BUCKETS N FIRST-COALESCED-STEP
    for s in $(seq 0 $((STEPS - 1))); do for r in $(seq 0 $(($1 - 1))); do
        if [ "$s" -lt "$4" ]; then echo "$s $r $(($2 * $3)) 0"; else echo "$s $r $2 $(($2 * ($3 - 1)))"; fi
    done; done
}

# Each loss on 2 and on 4 ranks; double and single, one bucket and three,
# spread over the six runs; every:N besides auto for mnrl.
for combo in "2 mnrl double 1" "2 mnrl-gather single 3" "2 siglip-ring double 3" \
             "4 mnrl single 3" "4 mnrl-gather double 1" "4 siglip-ring single 1"; do
    set -- $combo
    np=$1 loss=$2 prec=$3 nb=$4 tol=1e-12
    [ "$prec" = single ] && tol=1e-5
    N=$((COLS * ((BATCH / np + MB - 1) / MB)))
    tag="$np.$loss.$prec"
    trainer "ref.$tag" $np -- --sync per-step --loss $loss --precision $prec --buckets $nb
    trainer "auto.$tag" $np --set CCSHIM_COALESCE=auto -- --sync per-minibatch --loss $loss \
        --precision $prec --buckets $nb
    e=$(relerr "$CCS_TMP/ref.$tag.dump" "$CCS_TMP/auto.$tag.dump")
    tap_check "$np ranks, $loss, $prec, $nb bucket(s), auto: $e (tolerance $tol)" within "$e" $tol
    tap_eq "  ... traces: all real while learning, then one real per bucket per step" \
        "$(expect_steps $np $nb $N 2)" "$(per_step "auto.$tag")"
    [ "$loss" = mnrl ] || continue
    trainer "ev.$tag" $np --set CCSHIM_COALESCE=every:$N -- --sync per-minibatch --loss $loss \
        --precision $prec --buckets $nb
    e=$(relerr "$CCS_TMP/ref.$tag.dump" "$CCS_TMP/ev.$tag.dump")
    tap_check "  ... every:$N: $e (tolerance $tol)" within "$e" $tol
    tap_eq "  ... every:$N: one real reduction per bucket in every step" \
        "$(expect_steps $np $nb $N 0)" "$(per_step "ev.$tag")"
done

# A shorter last step on every rank (one mini-batch fewer) is reported.
inj="--inject skip-minibatch:0:$((STEPS - 1)) --inject skip-minibatch:1:$((STEPS - 1))"
# shellcheck disable=SC2086
trainer short 2 --set CCSHIM_COALESCE=auto -- --sync per-minibatch $inj
tap_check "shorter last step under auto: reported on both ranks, naming the step" \
    test "$(grep -c "step $((STEPS - 1)) ended with $((COLS * BATCH / 2 / MB - 1)) deferred" "$CCS_TMP/short.err")" = 2
tap_done
