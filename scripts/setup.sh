#!/usr/bin/env bash
# scripts/setup.sh - installs what is missing (Debian/Ubuntu, apt-get) and
# builds ccshim out of tree in _build/.  Used by demo.sh, test.sh and CI.
# Environment: CCSHIM_BUILD (build directory, default _build),
# CCSHIM_CONFIGURE_FLAGS (extra configure flags), CCSHIM_NO_APT=1 to skip apt-get;
# CCSHIM_VENV, CCSHIM_WHEELS, CCSHIM_NO_REALSTACK=1: the real-stack tier's
# virtual environment (scripts/realstack-venv.sh: torch 2.13 and
# sentence-transformers 6.0.1 from PyPI, made once, then reused);
# CCSHIM_SDIST, CCSHIM_NO_PEERS=1: the peer suite's sources
# (scripts/mpi4py-suite.sh: mpi4py's own tests, of the installed version).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CCSHIM_BUILD:-$top/_build}
pkgs=(build-essential autoconf automake libtool pkg-config make gawk
      libopenmpi-dev openmpi-bin mpich libmpich-dev valgrind gdb check libunwind-dev libdw-dev libsodium-dev libopenblas-dev
      python3 python3-torch python3-mpi4py python3-pip python3-venv python3-dev binutils clang chromium
      libotf2-trace-dev otf2-tools prometheus prometheus-node-exporter hpcc lammps)
if [ "${CCSHIM_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; then
    missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
        echo "setup: installing ${missing[*]}"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || ./autogen.sh >/dev/null
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" --enable-werror ${CCSHIM_CONFIGURE_FLAGS:-} >configure.out || { cat configure.out; exit 1; }
    sed -n '/configuration summary/,$p' configure.out
fi
make -j"$(nproc)" >make.out 2>&1 || { tail -50 make.out; exit 1; }
echo "setup: built in $build"
# one line: the real-stack tier's environment made, reused or skipped (why)
"$top/scripts/realstack-venv.sh"
# one line: mpi4py's own test suite fetched, reused or skipped (why)
"$top/scripts/mpi4py-suite.sh"
