#!/bin/sh
# Preloading libccshim.so into a program that does not use NCCL loads neither
# libnccl nor libcuda (the shim links neither and only looks NCCL up among the
# libraries already loaded).  An intercepted function with no NCCL behind it,
# or one the loaded NCCL lacks (the fake has no ncclCommShrink), returns
# ncclInternalError (3) and is logged once, naming the function.
. "$top_srcdir/tests/tap.sh"

PROG=$top_builddir/tests/nccl/nccl_absent
SHIM=$top_builddir/.libs/libccshim.so
FAKE=$top_builddir/tests/nccl/libnccl.so.2
[ -x "$PROG" ] || tap_skip_all "nccl.h was not found at configure time (nccl_absent not built)"
[ -f "$SHIM" ] || tap_skip_all "libccshim.so is not built"
tap_plan 9

NONE='libnccl=0
libcuda=0
libcudart=0'

run() { # OUTFILE ERRFILE ENV... -- ARGS: runs the program under a 30 s limit
    out=$1 err=$2; shift 2
    ccs_run_timeout 30 env "$@" >"$out" 2>"$err"
}

run "$CCS_TMP/a.out" "$CCS_TMP/a.err" LD_PRELOAD="$SHIM" "$PROG"
tap_eq "preloaded, no NCCL call: neither libnccl nor libcuda mapped" "$NONE" "$(cat "$CCS_TMP/a.out")"

run "$CCS_TMP/b.out" "$CCS_TMP/b.err" "$PROG" call
tap_eq "without the shim the program finds no NCCL function" \
    "allreduce=absent
shrink=absent
shrink=absent
$NONE" "$(cat "$CCS_TMP/b.out")"

run "$CCS_TMP/c.out" "$CCS_TMP/c.err" LD_PRELOAD="$SHIM" "$PROG" call
tap_eq "preloaded, NCCL functions called with no NCCL loaded: ncclInternalError, still nothing loaded" \
    "allreduce=3
shrink=3
shrink=3
$NONE" "$(cat "$CCS_TMP/c.out")"
tap_eq "the missing ncclAllReduce is logged once" 1 "$(grep -c 'ncclAllReduce called but no loaded NCCL library defines pncclAllReduce or ncclAllReduce' "$CCS_TMP/c.err")"
tap_eq "the missing ncclCommShrink is logged once although called twice" 1 "$(grep -c 'ncclCommShrink called but no loaded NCCL' "$CCS_TMP/c.err")"

if [ -f "$FAKE" ]; then
    # The fake NCCL preloaded too: ncclAllReduce reaches it (NULL comm:
    # ncclInvalidArgument, 4, as without the shim); ncclCommShrink, which
    # it lacks, does not break anything.
    run "$CCS_TMP/d.out" "$CCS_TMP/d.err" LD_PRELOAD="$FAKE" "$PROG" call
    run "$CCS_TMP/e.out" "$CCS_TMP/e.err" LD_PRELOAD="$SHIM $FAKE" "$PROG" call
    tap_eq "fake NCCL alone: its own answers" "allreduce=4
shrink=absent
shrink=absent" "$(sed -n 1,3p "$CCS_TMP/d.out")"
    tap_eq "fake NCCL behind the shim: the same allreduce result; shrink, which it lacks, is ncclInternalError" \
        "allreduce=4
shrink=3
shrink=3" "$(sed -n 1,3p "$CCS_TMP/e.out")"
    tap_eq "the NCCL the fake lacks is logged once" 1 "$(grep -c 'ncclCommShrink called but no loaded NCCL' "$CCS_TMP/e.err")"
    tap_eq "fake NCCL behind the shim: libcuda still not mapped" "libcuda=0
libcudart=0" "$(sed -n 5,6p "$CCS_TMP/e.out")"
else
    for t in 1 2 3 4; do tap_skip "fake NCCL check $t" "tests/nccl/libnccl.so.2 not built"; done
fi
tap_done
