#!/bin/sh
# symbols.sh - the preload libraries export exactly the intercepted API and
# ccshim_*, nothing a job could clash with (tests/integration/symbols-*.txt).
. "$top_srcdir/tests/tap.sh"
d="$top_srcdir/tests/integration"
core="$top_builddir/.libs/libccshim.so"
mpi="$top_builddir/.libs/libccshim-mpi.so"
command -v nm >/dev/null || tap_skip_all "nm not installed"
tap_plan 4
exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWDBVRi]$/ {print $3}' | sort -u; }
nccl_built() { exports "$core" | grep -q '^ncclAllReduce$'; }

expect_core="$CCS_TMP/core.txt"
cat "$d/symbols-api.txt" > "$expect_core"
if grep -q '^#define HAVE_NCCL 1' "$top_builddir/config.h"; then cat "$d/symbols-nccl.txt" >> "$expect_core"; fi
sort -o "$expect_core" "$expect_core"
exports "$core" > "$CCS_TMP/core.got"
if diff -u "$expect_core" "$CCS_TMP/core.got" > "$CCS_TMP/core.diff"; then
    tap_ok "libccshim.so exports exactly the expected symbols"
else
    tap_not_ok "libccshim.so exports exactly the expected symbols"; tap_diag < "$CCS_TMP/core.diff"
fi
tap_check "libccshim.so does not link MPI, NCCL or CUDA" \
    sh -c "! readelf -d '$core' | grep -E 'NEEDED.*(libmpi|libnccl|libcuda)'"
if [ -f "$mpi" ]; then
    cat "$expect_core" "$d/symbols-mpi.txt" | sort > "$CCS_TMP/mpi.txt"
    exports "$mpi" > "$CCS_TMP/mpi.got"
    if diff -u "$CCS_TMP/mpi.txt" "$CCS_TMP/mpi.got" > "$CCS_TMP/mpi.diff"; then
        tap_ok "libccshim-mpi.so exports exactly the expected symbols"
    else
        tap_not_ok "libccshim-mpi.so exports exactly the expected symbols"; tap_diag < "$CCS_TMP/mpi.diff"
    fi
    tap_check "libccshim-mpi.so links MPI but not NCCL or CUDA" \
        sh -c "readelf -d '$mpi' | grep -q 'NEEDED.*libmpi' && ! readelf -d '$mpi' | grep -E 'NEEDED.*(libnccl|libcuda)'"
else
    tap_skip "libccshim-mpi.so exports" "built without MPI"
    tap_skip "libccshim-mpi.so links" "built without MPI"
fi
tap_done
