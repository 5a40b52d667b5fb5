#!/usr/bin/env bash
# scripts/check-mpich.sh - ccshim built against a second MPI, Debian's MPICH
# (`make check-mpich`; its own build directory, _mpich/, configured with
# MPICC=mpicc.mpich), run under mpiexec.mpich: tests/mpich/mpich.sh (the
# legal corpus, intercommunicators, each way of going out of step),
# tests/integration/mpi-every-call.sh (every recorded call leaves the
# record the matching rules give; MPICH 4 has MPI-4's persistent and
# large-count collectives), tests/mpi-coll/mpi-coll.sh (neighbourhood,
# persistent and large-count calls, legal and mismatched) and
# tests/integration/symbols.sh (the exports follow what MPICH has).  Prints their TAP lines, then
# "check-mpich: MPICH V: N passed, N failed, N skipped"; fails if a point
# fails.  Skips (77) without mpicc.mpich and mpiexec.mpich (Debian: apt-get
# install mpich libmpich-dev).
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
make -j2 libccshim.la libccshim-mpi.la ccshim-run ccshim-audit tests/mpi-legal/legal tests/integration/mpi_every_call tests/mpi-inter/inter tests/mpi-coll/coll \
    tests/desync/desync_scenario tests/ccs_trace_dump >make.log 2>&1 || { tail -30 make.log; exit 1; }
ldd .libs/libccshim-mpi.so | grep -q libmpich || { echo "check-mpich: libccshim-mpi.so is not linked with MPICH"; exit 1; }
# The TAP tests, against this build and MPICH's launcher (tap.sh's
# ccs_mpirun drives Hydra: the same timeout, and no process left behind).
out=$(for t in tests/integration/symbols.sh tests/integration/mpi-every-call.sh tests/mpi-coll/mpi-coll.sh tests/mpich/mpich.sh; do
    echo "# $t"
    top_srcdir=$top top_builddir=$build MPIRUN=$(command -v mpiexec.mpich) sh "$top/$t" 2>&1
done)
echo "$out"
passed=$(echo "$out" | grep -c '^ok .*' | tr -d ' ')
skipped=$(echo "$out" | grep -c '^ok .* # SKIP')
failed=$(echo "$out" | grep -c '^not ok')
echo "check-mpich: $(mpichversion 2>/dev/null | awk -F: '/Version/ {gsub(/[ \t]/, "", $2); print "MPICH " $2}'):" \
    "$((passed - skipped)) passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
