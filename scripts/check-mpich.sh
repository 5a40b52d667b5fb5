#!/usr/bin/env bash
# scripts/check-mpich.sh - ccshim built against a second MPI, Debian's MPICH
# (`make check-mpich`; its own build directory, _mpich/, configured with
# MPICC=mpicc.mpich), run under mpiexec.mpich:
#   - the legal-MPI corpus on 2 to 5 ranks and the intercommunicator
#     program on 5 (1+4, 2+3, 3+2) under CCSHIM_ON_DESYNC=abort: exit 0, no
#     verdict, the plain run's results; a split whose plain run fails in
#     MPICH itself is said so and not compared (MPICH 4.0.2's MPI_Ibcast on
#     an intercommunicator asserts in 3+2 and leaves wrong values in 2+3);
#   - tests/integration/mpi-every-call.sh: every MPI function ccshim records
#     leaves, in the trace, the record the matching rules give;
#   - each way of going out of step (tests/desync/desync_scenario) on 4
#     ranks: the verdict's class, ranks and seq, as under Open MPI.
# Prints a line per check and fails if one fails.  Skips (77) without
# mpicc.mpich and mpiexec.mpich (Debian: apt-get install mpich libmpich-dev).
# Environment: CCSHIM_MPICH_BUILD (default _mpich in the source tree).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CCSHIM_MPICH_BUILD:-$top/_mpich}
for p in mpicc.mpich mpiexec.mpich; do
    command -v "$p" >/dev/null || { echo "check-mpich: no $p (Debian: apt-get install mpich libmpich-dev); skipped"; exit 77; }
done
mkdir -p "$build"
cd "$build" || exit 1
if [ ! -f Makefile ]; then
    "$top/configure" --quiet MPICC=mpicc.mpich >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
fi
make -j2 libccshim.la libccshim-mpi.la ccshim-run tests/mpi-legal/legal tests/integration/mpi_every_call tests/mpi-inter/inter \
    tests/desync/desync_scenario tests/ccs_trace_dump >make.log 2>&1 || { tail -30 make.log; exit 1; }
ldd .libs/libccshim-mpi.so | grep -q libmpich || { echo "check-mpich: libccshim-mpi.so is not linked with MPICH"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 passed=0
ok() { echo "check-mpich: ok: $*"; passed=$((passed + 1)); }
bad() { echo "check-mpich: FAILED: $*"; failed=$((failed + 1)); }
run() { # NP ARGS...: mpiexec.mpich with a bound (an MPICH job that hangs still ends)
    local np=$1
    shift
    timeout 120 mpiexec.mpich -n "$np" "$@"
}
verdicts() { cat "$1"/log-*.txt 2>/dev/null | grep '^ccshim [A-Z]' || true; }

# shim_vs_plain NAME NP PROGRAM ARGS...: the program plain and under ccshim;
# the same sorted output, exit 0, no verdict.  PROGRAM may name an output
# directory as an argument @OUT@, replaced by one per run.
shim_vs_plain() {
    local name=$1 np=$2
    shift 2
    local d="$tmp/$name" prc src
    mkdir -p "$d/plain" "$d/shim"
    run "$np" "${@/#@OUT@/$d/plain}" >"$d/plain.out" 2>"$d/plain.err"
    prc=$?
    if [ "$prc" != 0 ]; then
        echo "check-mpich: $name: the plain run fails in MPICH itself (exit $prc: $(grep -m1 -E 'Assertion|error|^BAD' "$d/plain.err")); not compared"
        return
    fi
    run "$np" env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_ON_DESYNC=abort "$build/ccshim-run" --mpi -- \
        "${@/#@OUT@/$d/shim}" >"$d/shim.out" 2>"$d/shim.err"
    src=$?
    local lines
    lines=$(wc -l <"$d/plain.out")
    if [ "$src" = 0 ] && [ -z "$(verdicts "$d")" ] && [ "$lines" -gt 0 ] &&
        cmp -s <(sort "$d/plain.out") <(sort "$d/shim.out"); then
        ok "$name: exit 0, no verdict, the plain run's $lines lines"
    else
        bad "$name: exit $src, verdicts: $(verdicts "$d" | head -2), output $( cmp -s <(sort "$d/plain.out") <(sort "$d/shim.out") && echo same || echo differs)"
    fi
}

for np in 2 3 4 5; do
    shim_vs_plain "legal-$np" "$np" "$build/tests/mpi-legal/legal"
done
every=$(top_srcdir=$top top_builddir=$build MPIRUN=$(command -v mpiexec.mpich) "$top/tests/integration/mpi-every-call.sh" 2>&1)
if echo "$every" | grep -q '^ok' && ! echo "$every" | grep -q '^not ok'; then
    ok "every-call: $(echo "$every" | grep -c '^ok') of $(echo "$every" | grep -c '^ok\|^not ok') points of mpi-every-call.sh"
else
    bad "every-call: $(echo "$every" | grep '^not ok' | head -3)"
fi
for a in 1 2 3; do
    shim_vs_plain "inter-$a+$((5 - a))" 5 "$build/tests/mpi-inter/inter" "$a" @OUT@
done

# verdict NAME REGEX [VAR=VALUE...] -- SCENARIO ARGS: 4 ranks under abort;
# every verdict line (one text) matches REGEX.
verdict() {
    local name=$1 re=$2 envs=()
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local d="$tmp/$name" lines
    mkdir -p "$d"
    run 4 env CCSHIM_LOG="$d/log-%r.txt" CCSHIM_SUMMARY=0 CCSHIM_ON_DESYNC=abort SETTLE_MS=600 "${envs[@]}" \
        "$build/ccshim-run" --mpi -- "$build/tests/desync/desync_scenario" "$@" >"$d/out" 2>&1
    local rc=$?
    lines=$(verdicts "$d" | sed 's/ \[seen by.*//; s/comm=0x[0-9a-f]* //; s/ for [0-9.]* s/ for N s/g' | sort -u)
    if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$(echo "$lines" | grep -c .)" = 1 ] && echo "$lines" | grep -Eq "$re"; then
        ok "$name: $lines"
    else
        bad "$name: exit $rc, verdicts: $lines"
    fi
}
AR='allreduce\(count=4, float32, sum\)'
M='^ccshim MISMATCH size=4 seq=3: rank 1 issued'
verdict count "$M allreduce\(count=8, float32, sum\) where ranks 0,2-3 issued $AR$" -- count
verdict dtype "$M allreduce\(count=4, int32, sum\) where ranks 0,2-3 issued $AR$" -- dtype
verdict op "$M allreduce\(count=4, float32, max\) where ranks 0,2-3 issued $AR$" -- op
verdict root "$M bcast\(count=4, float32, root=1\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$" -- root
verdict kind "$M bcast\(count=4, float32, root=0\) where ranks 0,2-3 issued $AR$" -- kind
verdict sigtype "$M bcast\(count=4, int32, root=0\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$" -- sigtype
verdict derived "$M bcast\(count=8, float32, root=0\) where ranks 0,2-3 issued bcast\(count=4, float32, root=0\)$" -- derived
verdict skip "^ccshim DESYNC size=4 seq=5: ranks 0,2-3 blocked in $AR at seq 5 for N s; rank 1 at seq 4 \(1 behind, in MPI_Finalize\)$" -- skip
verdict exit "^ccshim DESYNC size=4 seq=3: ranks 0,2-3 blocked in $AR at seq 3 for N s; rank 1 at seq 2 \(1 behind, exited\)$" -- exit
# 12 communicators, more than a status holds; the odd call at seq 501 of
# the last one completes, so the host's search finds it.
verdict many "^ccshim MISMATCH size=4 seq=501: rank 1 issued allreduce\(count=4, float32, max\) where ranks 0,2-3 issued $AR$" \
    COMMS=12 SETTLE_MS=3000 -- op 2000 500
echo "check-mpich: $(mpichversion 2>/dev/null | awk -F: '/Version/ {gsub(/[ \t]/, "", $2); print "MPICH " $2}'): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
