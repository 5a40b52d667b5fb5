#!/bin/bash
# build-carry.sh - builds what tests/gpu/run-device-checks.sh needs on the
# GPU machine (which has no MPI, no Autotools and maybe no libunwind) into
# .gpu-carry/ at the repository root (ignored by git), under 64 MiB:
#
#   bin/     ccshim-run ccshim-audit ccshim-trainer-nccl
#   lib/     libccshim.so (NCCL interception; LD_PRELOAD)
#   share/ccshim/python/   the PyTorch step-marker helper of ccshim-run --torch
#   deps/    shared libraries those need beyond glibc and NCCL (libunwind,
#            OpenBLAS and its Fortran runtime, the CUDA runtime the trainer
#            was linked with); used only when the machine lacks them
#   fake/    libnccl.so.2, the test-only host NCCL (dry runs, check 5's protocol part)
#   tests/   nccl_bench (check 4), gpu_stuck (check 5)
#   expected/  the MPI trainer's figures on this CPU (check 3; make-expected.sh)
#   MANIFEST   what was built, from which commit, and the glibc it needs
#
# Configured with --prefix=/tmp/ccshim-gpu-carry: run-device-checks.sh links
# that path to the carried folder, so ccshim-run finds its library and
# Python helper as if installed.
#
#   tests/gpu/build-carry.sh [--build-dir DIR] [--carry DIR] [-j N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/_build/gpu-carry
carry=$root/.gpu-carry
jobs=2
prefix=/tmp/ccshim-gpu-carry
while [ $# -gt 0 ]; do
    case $1 in
    --build-dir) build=$2; shift 2 ;;
    --carry) carry=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "build-carry.sh: unknown argument '$1' (expected --build-dir DIR, --carry DIR, -j N)" >&2; exit 2 ;;
    esac
done
say() { echo "build-carry: $*"; }

if [ ! -x "$root/configure" ] || [ "$root/configure.ac" -nt "$root/configure" ]; then
    say "running autogen.sh"
    (cd "$root" && ./autogen.sh)
fi
mkdir -p "$build"
if [ ! -f "$build/Makefile" ] || ! grep -q "^prefix = $prefix\$" "$build/Makefile"; then
    say "configuring in $build (prefix $prefix)"
    (cd "$build" && "$root/configure" --prefix="$prefix" > configure.out 2>&1) ||
        { tail -20 "$build/configure.out"; exit 1; }
fi
summary=$(sed -n '/configuration summary/,$p' "$build/configure.out" 2>/dev/null || true)
say "building (make -j$jobs)"
make -C "$build" -j"$jobs" all tests/nccl/libnccl.so.2 tests/cuda/libcuda.so.1 tests/gpu/nccl_bench tests/gpu/gpu_stuck \
    tests/nccl/nccl_track > "$build/make-carry.out" 2>&1 ||
    { tail -30 "$build/make-carry.out"; exit 1; }
for f in ccshim-run ccshim-audit ccshim-trainer-nccl tests/nccl/libnccl.so.2 tests/cuda/libcuda.so.1 tests/gpu/nccl_bench \
    tests/gpu/gpu_stuck tests/nccl/nccl_track; do
    [ -e "$build/$f" ] || { say "$f was not built (configure found no NCCL headers, libnccl or BLAS?)"; echo "$summary"; exit 1; }
done
stage=$build/stage
rm -rf "$stage"
make -C "$build" install DESTDIR="$stage" > "$build/install-carry.out" 2>&1 || { tail -20 "$build/install-carry.out"; exit 1; }

rm -rf "$carry"
mkdir -p "$carry/bin" "$carry/lib" "$carry/deps" "$carry/fake" "$carry/fakecuda" "$carry/tests" "$carry/share/ccshim"
for b in ccshim-run ccshim-audit ccshim-trainer-nccl; do cp "$stage$prefix/bin/$b" "$carry/bin/"; done
cp -L "$stage$prefix/lib/libccshim.so" "$carry/lib/libccshim.so"
cp -r "$stage$prefix/share/ccshim/python" "$carry/share/ccshim/"
cp "$build/tests/nccl/libnccl.so.2" "$carry/fake/"
# The test CUDA driver stays in its own directory: only the dry-run parts
# of checks 6 and 7 put it on the library path, never a GPU check.
cp "$build/tests/cuda/libcuda.so.1" "$carry/fakecuda/"
cp "$build/tests/gpu/nccl_bench" "$build/tests/gpu/gpu_stuck" "$build/tests/nccl/nccl_track" "$carry/tests/"

# Dependencies beyond glibc, the C++ runtime and NCCL itself (which PyTorch
# ships): copied under their sonames.
for obj in "$carry/lib/libccshim.so" "$carry/bin/ccshim-trainer-nccl"; do
    ldd "$obj" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r soname path; do
        case $soname in
        libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*|libnccl.so.*) ;;
        *) [ -e "$carry/deps/$soname" ] || cp -L "$path" "$carry/deps/$soname" ;;
        esac
    done
done

# The reference figures: the MPI trainer on this CPU.
if [ -x "$build/ccshim-trainer" ]; then
    mpirun=$(sed -n 's/^MPIRUN = //p' "$build/Makefile")
    "$here/make-expected.sh" "$carry/expected" "$build/ccshim-trainer" "${mpirun:-mpirun}" \
        "$build/ccshim-run" "$build/.libs"
    rm -f "$carry"/expected/*.out "$carry"/expected/*.err
else
    say "no MPI trainer built (no MPI here): check 3 will have no reference figures"
fi

glibc=$(for f in "$carry"/bin/* "$carry"/lib/*.so "$carry"/tests/*; do objdump -T "$f"; done 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
{
    echo "ccshim GPU carry, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
    echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "needs glibc >= ${glibc#GLIBC_}"
    echo "prefix $prefix"
    echo "$summary"
    (cd "$carry" && find . -type f ! -name MANIFEST -printf '%s %p\n' | sort -k2)
} > "$carry/MANIFEST"
kib=$(du -sk "$carry" | cut -f1)
say "$carry: $((kib / 1024)) MiB, needs glibc >= ${glibc#GLIBC_}"
if [ "$kib" -gt $((60 * 1024)) ]; then
    say "too large to carry (limit 64 MiB with the working tree)"; exit 1
fi
