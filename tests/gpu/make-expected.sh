#!/bin/sh
# make-expected.sh OUTDIR TRAINER [MPIRUN [CCSHIM_RUN LIBDIR]] - the reference trainer's figures
# with the MPI backend on the CPU, for check 3 of run-device-checks.sh to
# compare the NCCL backend against: for 1 and 2 ranks and both
# synchronisations, the JSON summary (expected/mpi-wW-SYNC.json) and the
# gradient/parameter dump (expected/mpi-wW-SYNC.dump).  The arguments are
# written to OUTDIR/args so that both sides use exactly the same ones.
# With CCSHIM_RUN and LIBDIR (holding libccshim-mpi.so): check 5's protocol
# part, which needs MPI: each injected fault on 2 ranks under
# CCSHIM_ON_DESYNC=abort, its exit status, time and verdict, in OUTDIR/protocol.txt.
#
# OpenBLAS picks its kernels by CPU; OPENBLAS_CORETYPE pins them so that the
# GPU machine computes the same bits as this one.
set -eu
usage="usage: make-expected.sh OUTDIR TRAINER [MPIRUN [CCSHIM_RUN LIBDIR]]"
out=${1:?$usage}
trainer=${2:?$usage}
mpirun=${3:-mpirun}
run=${4:-}
libdir=${5:-}
args="--batch 64 --mini-batch 8 --columns 2 --steps 3 --seed 7"
OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE OMP_NUM_THREADS OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
mkdir -p "$out"
mpiopts="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
printf '%s\n' "$args" > "$out/args"
for w in 1 2; do
    for sync in per-minibatch per-step; do
        base="$out/mpi-w$w-$sync"
        # shellcheck disable=SC2086 # $args is a list of options
        if ! timeout 120 "$mpirun" $mpiopts -np "$w" "$trainer" $args --sync "$sync" \
            --dump-grad "$base.dump" > "$base.out" 2> "$base.err"; then
            echo "make-expected.sh: the MPI trainer failed ($w ranks, $sync); see $base.err" >&2
            exit 1
        fi
        grep '^{' "$base.out" > "$base.json"
    done
done

[ -n "$run" ] && [ -n "$libdir" ] || exit 0
: > "$out/protocol.txt"
for inj in skip-minibatch:1:1 extra-allreduce:1:1 wrong-count:1:1; do
    t0=$(date +%s%N)
    rc=0
    # shellcheck disable=SC2086
    timeout 120 "$mpirun" $mpiopts -np 2 "$run" --mpi --libdir "$libdir" --on-desync abort -- "$trainer" $args \
        --sync per-minibatch --inject "$inj" > "$out/protocol.out" 2> "$out/protocol.err" || rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    verdict=$(grep -m1 -E '^ccshim (DESYNC|MISMATCH)' "$out/protocol.err" | sed 's/ \[seen by.*//')
    printf '%s\texit %s\t%s ms\t%s\n' "$inj" "$rc" "$ms" "${verdict:-no verdict}" >> "$out/protocol.txt"
done
rm -f "$out/protocol.out" "$out/protocol.err"
