#!/bin/sh
# coalesce-nccl.sh - coalescing on the NCCL path, through the test-only host
# NCCL (tests/nccl/libnccl.so.2; host buffers, no GPU, no CUDA kernel).
# tests/coalesce/coal_nccl is a DDP-style job over NCCL: with every:K, per-
# minibatch must give bitwise the parameters of per-step for ncclSum (bucket
# scaled by 1/W), ncclAvg and PreMulSum with a host scalar, in place, out of
# place, inside ncclGroupStart/End, float and double; PreMulSum with a device
# scalar, ncclMax, integer and small reductions pass through untouched; the
# NCCL trainer (--device host) matches per-step and a shorter last step is
# reported.  The deferred answers go through NCCL itself on a private
# one-rank communicator (here: the host NCCL's), never through a kernel.
. "$top_srcdir/tests/tap.sh"
prog="$top_builddir/tests/coalesce/coal_nccl"
fake="$top_builddir/tests/nccl/libnccl.so.2"
trainer="$top_builddir/ccshim-trainer-nccl"
[ -x "$prog" ] && [ -f "$fake" ] || tap_skip_all "built without NCCL headers (no host NCCL)"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 17
W=2 K=6 STEPS=3
# Let the programs find the host NCCL before any real one.
LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

# nranks NAME PROG SETTINGS... -- ARGS: W processes of PROG (RANK, WORLD_SIZE)
# under ccshim-run; rank 0's output in NAME.out; status 0 when all succeed.
nranks() {
    name=$1 p=$2; shift 2
    sets=""
    while [ "$1" != "--" ]; do sets="$sets $1"; shift; done
    shift
    rm -f "$CCS_TMP/$name.id"
    pids=""
    for r in $(seq 0 $((W - 1))); do
        # shellcheck disable=SC2086
        # One job id per run, as a launcher gives (the side channel is per job).
        RANK=$r WORLD_SIZE=$W CCSHIM_JOB_ID="coal-$name-$$" ccs_run_timeout 60 "$CCSHIM_RUN" --no-mpi \
            --trace-dir "$CCS_TMP/$name.tr" $sets \
            -- "$p" "$@" > "$CCS_TMP/$name.$r.out" 2> "$CCS_TMP/$name.$r.err" &
        pids="$pids $!"
    done
    st=0
    for q in $pids; do wait "$q" || st=1; done
    cp "$CCS_TMP/$name.0.out" "$CCS_TMP/$name.out"
    cat "$CCS_TMP/$name".*.err > "$CCS_TMP/$name.err"
    return $st
}
job() { n=$1; shift; nranks "$n" "$prog" "$@" --id-file "$CCS_TMP/$n.id" --steps $STEPS --minibatches $K; }
digest() { awk '$1=="digest" {print $2}' "$CCS_TMP/$1.out"; }
# counts NAME: "real deferred" bucket all-reduces (count > 1, float) over all ranks and steps
counts() {
    "$CCSHIM_AUDIT" --tsv-records "$CCS_TMP/$1.tr" 2>/dev/null | awk -F'\t' '
        !/^#/ && $4=="allreduce" && $6 ~ /float/ && $7 != "max" && $5 > 1 { if ($11 ~ /deferred/) d++; else r++ }
        END { printf "%d %d\n", r, d }'
}
R=$((W * STEPS)) D=$((W * STEPS * (K - 1)))

job ref -- --per-step
tap_eq "per-step reference runs on the host NCCL" 0 $?
job ev --set CCSHIM_COALESCE=every:$K --
tap_eq "ncclSum, in place, every:$K: bitwise the per-step parameters" "$(digest ref)" "$(digest ev)"
tap_eq "  ... one real reduction per step per rank, the others deferred" "$R $D" "$(counts ev)"
job evog --set CCSHIM_COALESCE=every:$K -- --out-of-place --group
tap_eq "out of place, inside ncclGroupStart/End: bitwise equal" "$(digest ref)" "$(digest evog)"
tap_eq "  ... counts" "$R $D" "$(counts evog)"
# auto inside groups: the private communicator is made just after the
# caller's ncclGroupEnd, never inside the group (the host NCCL refuses a
# creation inside one: nothing would be deferred); 4 steps: 2 learnt, then
# one real per step.  (Learning steps are per-minibatch: not bitwise per-step.)
STEPS=4 job evag --set CCSHIM_COALESCE=auto -- --out-of-place --group
tap_eq "auto inside ncclGroupStart/End: the job succeeds, no private communicator refused, coalesced after learning" \
    "0 0 $((W * (2 * K + 2))) $((W * 2 * (K - 1)))" \
    "$? $(grep -c 'no private NCCL communicator' "$CCS_TMP/evag.err") $(counts evag)"
job refa -- --per-step --op avg
job eva --set CCSHIM_COALESCE=every:$K -- --op avg
tap_eq "ncclAvg: bitwise equal, coalesced" "$(digest refa) $R $D" "$(digest eva) $(counts eva)"
job refp -- --per-step --op premul
job evp --set CCSHIM_COALESCE=every:$K -- --op premul --out-of-place
tap_eq "PreMulSum with a host scalar (1/W): bitwise equal, coalesced" "$(digest refp) $R $D" \
    "$(digest evp) $(counts evp)"
job reff -- --per-step --float --op premul
job evf --set CCSHIM_COALESCE=every:$K -- --float --op premul --group
tap_eq "float32 PreMulSum in groups: bitwise equal, coalesced" "$(digest reff) $R $D" "$(digest evf) $(counts evf)"

# Untouched: a device scalar, MAX, integers, small buffers.
job pdplain -- --op premul-dev
job pd --set CCSHIM_COALESCE=every:$K -- --op premul-dev
tap_eq "PreMulSum with a device scalar: passed through (same result as without coalescing, nothing deferred)" \
    "$(digest pdplain) $((R * K)) 0" "$(digest pd) $(counts pd)"
for x in max int small; do
    job "x$x" --set CCSHIM_COALESCE=every:$K -- --extra $x
    tap_eq "--extra $x: correct, buckets still equal, only the buckets deferred" "extra_wrong 0 $(digest ev) $R $D" \
        "$(awk '$1=="extra_wrong"' "$CCS_TMP/x$x.out") $(digest "x$x") $(counts "x$x")"
done

# The NCCL trainer on the host NCCL: per-minibatch under every:N equals per-step.
if [ -x "$trainer" ]; then
    OPENBLAS_NUM_THREADS=1; export OPENBLAS_NUM_THREADS
    N=$((2 * 256 / W / 32))
    targs="--device host --steps 6 --batch 256 --mini-batch 32"
    # shellcheck disable=SC2086
    nranks tref "$trainer" -- $targs --sync per-step --nccl-id-file "$CCS_TMP/tref.id" --dump-grad "$CCS_TMP/tref.dump"
    # shellcheck disable=SC2086
    nranks tev "$trainer" --set CCSHIM_COALESCE=every:$N -- $targs --sync per-minibatch \
        --nccl-id-file "$CCS_TMP/tev.id" --dump-grad "$CCS_TMP/tev.dump"
    tap_check "ccshim-trainer-nccl --device host: every:$N gives the per-step gradients and parameters" \
        cmp -s "$CCS_TMP/tref.dump" "$CCS_TMP/tev.dump"
    tap_eq "  ... one real reduction per step" "$((W * 6)) $((W * 6 * (N - 1)))" "$(counts tev)"
    inj="--inject skip-minibatch:0:5 --inject skip-minibatch:1:5"
    # shellcheck disable=SC2086
    nranks tshort "$trainer" --set CCSHIM_COALESCE=every:$N -- $targs --sync per-minibatch $inj \
        --nccl-id-file "$CCS_TMP/tshort.id"
    tap_eq "  ... a shorter last step is reported on every rank" $W \
        "$(grep -c "step 5 ended with $((N - 1)) deferred" "$CCS_TMP/tshort.err")"
    # auto needs the side channel to agree across ranks (no MPI here).
    # shellcheck disable=SC2086
    nranks tauto "$trainer" --set CCSHIM_COALESCE=auto --set CCSHIM_LOG_LEVEL=info -- $targs --sync per-minibatch \
        --nccl-id-file "$CCS_TMP/tauto.id" --dump-grad "$CCS_TMP/tauto.dump"
    if grep -q "no way to agree" "$CCS_TMP/tauto.err"; then
        tap_skip "auto on NCCL" "the side channel did not start in this NCCL-only job"
    else
        e=$(paste "$CCS_TMP/tref.dump" "$CCS_TMP/tauto.dump" | awk '!/^#/ { d = $3 - $6; if (d < 0) d = -d;
            a = $3 < 0 ? -$3 : $3; if (d > m) m = d; if (a > x) x = a } END { print (m <= 1e-12 * x) ? "ok" : m / x }')
        tap_eq "auto: agreed, coalesced after learning, gradients within 1e-12" \
            "ok $((W * (2 * N + 4))) $((W * 4 * (N - 1)))" "$e $(counts tauto)"
    fi
else
    for t in 1 2 3 4; do tap_skip "NCCL trainer" "ccshim-trainer-nccl not built"; done
fi
tap_done
