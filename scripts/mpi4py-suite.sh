#!/usr/bin/env bash
# scripts/mpi4py-suite.sh - the peer suite of tests/peers/mpi4py-suite.sh:
# mpi4py's own test suite, from the source distribution of the version that
# Debian's python3-mpi4py installed for /usr/bin/python3 (`pip download
# --no-binary :all:`; the suite is not in the Debian package), unpacked
# outside the source tree.  Called by scripts/setup.sh, so that make check
# needs no network; prints one line.
#
# Environment: CCSHIM_SDIST (default ~/.cache/ccshim/sdist), the download
# cache, kept apart from the real-stack wheels (there `pip wheel mpi4py`
# takes the newest mpi4py it finds); the suite is unpacked beside it as
# mpi4py-VERSION/ and the outcome written beside it to mpi4py-suite.status:
# "ok VERSION DIR", or "skip: WHY" (no python3-mpi4py, no pip, no PyPI),
# which the test reads to skip with that line.  CCSHIM_NO_PEERS=1 skips it.
set -uo pipefail
cache=${CCSHIM_SDIST:-$HOME/.cache/ccshim/sdist}
status=$(dirname "$cache")/mpi4py-suite.status
py=${CCSHIM_PEER_PYTHON:-/usr/bin/python3}

say() { echo "mpi4py suite: $*"; }
skip() {
    mkdir -p "$(dirname "$status")"
    echo "skip: $*" >"$status"
    say "SKIPPED: $* (tests/peers/mpi4py-suite.sh will be skipped)"
    exit 0
}

[ "${CCSHIM_NO_PEERS:-0}" = 1 ] && skip "CCSHIM_NO_PEERS=1"
[ -x "$py" ] || skip "no $py"
# (importing the package, not mpi4py.MPI, starts no MPI)
ver=$("$py" -c 'import mpi4py; print(mpi4py.__version__)' 2>/dev/null) ||
    skip "$py has no mpi4py (apt-get install python3-mpi4py)"
case $ver in '' | *[!0-9.]*) skip "$py's mpi4py reports version '$ver', expected digits and dots" ;; esac
dir=$(dirname "$cache")/mpi4py-$ver
mkdir -p "$cache"
# one maker at a time (several checkouts share the cache)
if command -v flock >/dev/null; then
    exec 9>"$cache.lock"
    flock 9
fi
if [ -f "$dir/test/runtests.py" ]; then
    echo "ok $ver $dir" >"$status"
    say "reusing $dir"
    exit 0
fi
sdist=$cache/mpi4py-$ver.tar.gz
if [ ! -f "$sdist" ]; then
    "$py" -m pip --version >/dev/null 2>&1 || skip "$py has no pip (apt-get install python3-pip)"
    log=$(mktemp "${TMPDIR:-/tmp}/ccshim-mpi4py-suite.XXXXXX")
    trap 'rm -f "$log"' EXIT
    # an unreachable index fails in seconds, not after pip's default retries
    if ! "$py" -m pip --disable-pip-version-check --no-input download -q --retries 1 --timeout 20 \
            --no-binary :all: --no-deps -d "$cache" "mpi4py==$ver" >"$log" 2>&1 || [ ! -f "$sdist" ]; then
        why=$({ grep -m1 '^ERROR:' "$log" || grep -m1 -iE 'could not|failed' "$log"; } | cut -c1-160)
        rm -f "$sdist"
        skip "cannot fetch mpi4py==$ver's source from PyPI (${why:-pip download failed})"
    fi
fi
tmp=$(mktemp -d "$dir.XXXXXX") || skip "cannot write beside $cache"
if ! tar -xzf "$sdist" -C "$tmp" "mpi4py-$ver/test" 2>/dev/null || [ ! -f "$tmp/mpi4py-$ver/test/runtests.py" ]; then
    rm -rf "$tmp" "$sdist"
    skip "$sdist holds no mpi4py-$ver/test/runtests.py (removed; the next setup fetches it again)"
fi
rm -rf "$dir"
mv "$tmp/mpi4py-$ver" "$dir" && rmdir "$tmp"
echo "ok $ver $dir" >"$status"
say "fetched mpi4py $ver's test suite into $dir"
