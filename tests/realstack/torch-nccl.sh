#!/bin/sh
# torch-nccl.sh - can ccshim interpose the NCCL of PyPI's torch 2.13 (the
# tier's virtual environment; docs/nccl.md)?  libtorch_cuda.so takes
# ncclAllReduce, ncclCommInitRankConfig, ncclCommSplit, ... from libnccl.so.2
# through its dynamic symbol table (undefined there, NEEDED libnccl.so.2,
# defined in the nvidia-nccl wheel's libnccl.so.2), so the dynamic linker
# binds them to a preloaded libccshim.so: shown by the linker itself
# (LD_BIND_NOW=1 LD_DEBUG=bindings) under `ccshim-run --torch`.  And ccshim
# loads nothing: `import torch` maps the same CUDA and NCCL libraries (torch's
# own, no GPU needed) with and without ccshim-run, and a Python job that does
# not import torch gets no CUDA, NCCL or MPI library under ccshim-run --torch.
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 8
SYMS="ncclAllReduce ncclAllGather ncclReduceScatter ncclBroadcast ncclSend ncclRecv ncclGroupStart ncclGroupEnd
ncclCommInitRank ncclCommInitRankConfig ncclCommSplit ncclCommDestroy ncclCommAbort ncclGetUniqueId"
SYMS=$(echo $SYMS)
TL=$("$RS_PY" -c 'import os, torch; print(os.path.dirname(torch.__file__) + "/lib")' 2>/dev/null)
NL=$("$RS_PY" -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0] + "/lib/libnccl.so.2")' 2>/dev/null)
echo "# $TL/libtorch_cuda.so, $NL"
command -v nm >/dev/null && command -v readelf >/dev/null || tap_skip_all "no nm/readelf (binutils)"
# 1-3. the dynamic symbol tables
undef=$(nm -D --undefined-only "$TL/libtorch_cuda.so" | awk '$1=="U" {print $2}' | sed 's/@.*//' | sort -u)
tap_eq "libtorch_cuda.so: every NCCL entry point is undefined (U), bound at run time" \
    "$SYMS" "$(for s in $SYMS; do echo "$undef" | grep -qx "$s" && printf '%s ' "$s"; done | sed 's/ $//')"
tap_check "libtorch_cuda.so NEEDs libnccl.so.2 (not linked in statically)" \
    sh -c "readelf -d '$TL/libtorch_cuda.so' | grep -q 'NEEDED.*\[libnccl.so.2\]'"
defd=$(nm -D --defined-only "$NL" 2>/dev/null | awk '{print $3}' | sed 's/@.*//' | sort -u)
tap_eq "the nvidia-nccl wheel's libnccl.so.2 defines them" \
    "$SYMS" "$(for s in $SYMS; do echo "$defd" | grep -qx "$s" && printf '%s ' "$s"; done | sed 's/ $//')"

# 4. what the dynamic linker binds them to under ccshim-run --torch
mkdir -p "$CCS_TMP/ld"
LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$CCS_TMP/ld/b" ccs_run_timeout 120 "$CCSHIM_RUN" --torch -- \
    "$RS_PY" -c 'import torch' > "$CCS_TMP/bind.out" 2>&1
rc=$?
bound=$(cat "$CCS_TMP"/ld/b.* | awk '/binding file .*libtorch_cuda\.so .* to .*: normal symbol `nccl/ {
        lib = $0; sub(/.* to /, "", lib); sub(/ .*/, "", lib); n = split(lib, p, "/"); s = $NF; gsub(/[`'"'"']/, "", s)
        print s, p[n] }' | sort -u)
rm -rf "$CCS_TMP/ld"
# (ncclGetUniqueId is not intercepted: it stays NCCL's)
tap_eq "ccshim-run --torch, import torch: runs; libtorch_cuda's NCCL calls bound to libccshim.so (LD_DEBUG=bindings)" \
    "0 $(for s in $SYMS; do [ $s = ncclGetUniqueId ] && l=libnccl.so.2 || l=libccshim.so; printf '%s %s;' $s $l; done)" \
    "$rc $(for s in $SYMS; do echo "$bound" | awk -v s="$s" '$1==s {printf "%s %s;", $1, $2}'; done)"

# 5-7. what is mapped
MAPS='import re, sys
libs = sorted({l.split()[-1].rsplit("/", 1)[-1] for l in open("/proc/self/maps") if ".so" in l})
pat = re.compile(sys.argv[1])
print(" ".join(x for x in libs if pat.search(x)) or "none")'
GPU='cuda|nccl|cudart|cublas|cudnn|nvshmem|nvrtc|cufft|curand|cusparse'
plain=$("$RS_PY" -c "import torch; $MAPS" "$GPU" 2>/dev/null)
shim=$(ccs_run_timeout 120 "$CCSHIM_RUN" --torch -- "$RS_PY" -c "import torch; $MAPS" "$GPU|ccshim" 2>/dev/null)
echo "# import torch maps: $plain"
tap_eq "import torch: ccshim-run --torch adds libccshim.so and no CUDA/NCCL library to what torch maps itself" \
    "$(echo "$plain libccshim.so" | tr ' ' '\n' | sort | tr '\n' ' ')" "$(echo "$shim" | tr ' ' '\n' | sort | tr '\n' ' ')"
tap_check "  ... torch's own libnccl.so.2 is among them, no libcuda.so (driver) on this CPU job" \
    sh -c "echo '$plain' | grep -q 'libnccl.so.2' && ! echo '$plain' | grep -q 'libcuda\.so'"
tap_eq "a Python job without torch under ccshim-run --torch: no CUDA, NCCL or MPI library, nothing of torch" \
    "libccshim.so" "$(ccs_run_timeout 60 "$CCSHIM_RUN" --no-mpi --torch -- "$RS_PY" -c "import json; $MAPS; import sys; assert 'torch' not in sys.modules" "$GPU|mpi|ccshim|torch" 2>&1)"
tap_eq "torch's version under the shim" "2.13.0" \
    "$(ccs_run_timeout 60 "$CCSHIM_RUN" --no-mpi --torch -- "$RS_PY" -c 'import torch; print(torch.__version__.split("+")[0])' 2>&1)"
tap_done
