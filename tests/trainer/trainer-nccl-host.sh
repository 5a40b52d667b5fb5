#!/bin/sh
# tests/trainer/trainer-nccl-host.sh - ccshim-trainer-nccl (no MPI) with
# --device host over the test-only host NCCL (tests/nccl/libnccl.so.2):
# ranks from RANK/WORLD_SIZE, the ncclUniqueId through a file; it computes
# what the MPI trainer computes, passes --check, counts its calls; under the
# shim, ccshim-audit sees its NCCL reductions and ring exchanges.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
NCCL_TRAINER=$top_builddir/ccshim-trainer-nccl
FAKE_DIR=$top_builddir/tests/nccl
[ -x "$NCCL_TRAINER" ] || tap_skip_all "ccshim-trainer-nccl not built (needs nccl.h and libnccl)"
[ -e "$FAKE_DIR/libnccl.so.2" ] || tap_skip_all "no host NCCL (tests/nccl/libnccl.so.2) built"
tap_plan 9
T=$CCS_TMP
SMALL="--batch 48 --mini-batch 5 --columns 3 --dim-in 12 --dim-hidden 16 --dim-out 8 --device host"
n=0

# nccl_job NP OUT ARGS...: NP processes with RANK/WORLD_SIZE, a fresh id
# file, the host NCCL first on the library path; OUT gets rank 0's output
# (OUT.rR the others'); the status is the worst rank's.
nccl_job() {
    local np=$1 out=$2 r pids="" rc=0 st
    shift 2
    n=$((n + 1))
    for r in $(seq 0 $((np - 1))); do
        local o=$out; [ "$r" = 0 ] || o=$out.r$r
        ( ccs_run_timeout 60 env RANK="$r" WORLD_SIZE="$np" LD_LIBRARY_PATH="$FAKE_DIR" \
            "$@" --nccl-id-file "$T/id$n" >"$o" 2>"$o.err" ) &
        pids="$pids $!"
    done
    for r in $pids; do wait "$r"; st=$?; [ "$st" -gt "$rc" ] && rc=$st; done
    return $rc
}

# 1-2: the same run over MPI and over the host NCCL: the same gradient and
# parameters (both sum in rank order: bit for bit is not promised, 1e-12 is).
tr_run 3 "$T/mpi" $(echo "$SMALL" | sed 's/--device host//') --steps 2 --loss siglip-ring --dump-grad "$T/mpi.dump"
nccl_job 3 "$T/nccl" "$NCCL_TRAINER" $SMALL --steps 2 --loss siglip-ring --dump-grad "$T/nccl.dump"
tap_eq "3 NCCL host ranks run to the end" 0 $?
e=$(tr_dump_err "$T/nccl.dump" "$T/mpi.dump" grad)
tap_check "siglip-ring: NCCL gradient = MPI gradient (rel. error $e)" tr_below "$e" 1e-12
e=$(tr_dump_err "$T/nccl.dump" "$T/mpi.dump" param)
tap_check "siglip-ring: NCCL parameters = MPI parameters (rel. error $e)" tr_below "$e" 1e-12
tap_eq "its own counts: 3 x ceil(16/5) = 12 reductions, 2 sends and 2 receives per step" "24 4 4 nccl-host" \
    "$(tr_json "$T/nccl" allreduce) $(tr_json "$T/nccl" send) $(tr_json "$T/nccl" recv) \
$(grep '^{' "$T/nccl" | sed 's/.*"backend":"\([^"]*\)".*/\1/')"

# 5-6: --check over NCCL, with and without the compensation.
nccl_job 2 "$T/chk" "$NCCL_TRAINER" $SMALL --steps 1 --loss mnrl-gather --check
tap_eq "mnrl-gather over NCCL: --check passes" 0 $?
nccl_job 2 "$T/nochk" "$NCCL_TRAINER" $SMALL --steps 1 --loss mnrl-gather --check --no-compensation
tap_eq "... and fails without the compensation" 1 $?

# 7: a second rank without an id file is a usage error.
env RANK=1 WORLD_SIZE=2 "$NCCL_TRAINER" --device host >"$T/o" 2>"$T/e"
tap_eq "WORLD_SIZE=2 without --nccl-id-file: status 2" 2 $?

# 8-9: under the shim (NCCL interception), per rank and step.
if [ -x "$CCSHIM_RUN" ] && [ -x "$CCSHIM_AUDIT" ] && [ -e "$top_builddir/.libs/libccshim.so" ]; then
    nccl_job 2 "$T/sh" "$CCSHIM_RUN" --trace-dir "$T/tr" -- "$NCCL_TRAINER" $SMALL --steps 2 --loss siglip-ring
    got=$("$CCSHIM_AUDIT" --tsv "$T/tr" | awk -F '\t' '$4 == "allreduce" { print $1, $2, $5 }' | sort -n | tr '\n' ';')
    tap_eq "under the shim: 3 x ceil(24/5) = 15 NCCL all-reduces per rank per step" "0 0 15;0 1 15;1 0 15;1 1 15;" "$got"
    got=$("$CCSHIM_AUDIT" --tsv "$T/tr" | awk -F '\t' '$4 == "send" || $4 == "recv" { print $1, $2, $4, $5 }' | sort | tr '\n' ';')
    tap_eq "... and 1 send, 1 receive per rank per step" \
        "0 0 recv 1;0 0 send 1;0 1 recv 1;0 1 send 1;1 0 recv 1;1 0 send 1;1 1 recv 1;1 1 send 1;" "$got"
else
    tap_skip "NCCL under the shim" "libccshim.so, ccshim-run or ccshim-audit not built"
    tap_skip "NCCL under the shim (ring)" "libccshim.so, ccshim-run or ccshim-audit not built"
fi
tap_done
