#!/bin/sh
# symbols.sh - the preload libraries export exactly the intercepted API and
# ccshim_*, nothing a job could clash with (tests/integration/symbols-*.txt).
. "$top_srcdir/tests/tap.sh"
d="$top_srcdir/tests/integration"
core="$top_builddir/.libs/libccshim.so"
mpi="$top_builddir/.libs/libccshim-mpi.so"
command -v nm >/dev/null || tap_skip_all "nm not installed"
tap_plan 5
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
    # The MPI-4 functions this MPI has (configure's probes, in config.h).
    awk 'NR == FNR { if ($1 == "#define") have[$2] = 1; next }
         /^#/ { next }
         { n = split($1, f, "+"); ok = 1; for (i = 1; i <= n; i++) if (!(f[i] in have)) ok = 0; if (ok) print $2 }' \
        "$top_builddir/config.h" "$d/symbols-mpi4.txt" > "$CCS_TMP/mpi4.txt"
    cat "$expect_core" "$d/symbols-mpi.txt" "$CCS_TMP/mpi4.txt" | sort > "$CCS_TMP/mpi.txt"
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
# libsodium (the side channel's MAC) is inside, private: not a dependency a
# job's own libsodium could clash with, and none of its symbols exported.
tap_check "libsodium linked in with hidden symbols (no NEEDED, no export, crypto_auth inside)" \
    sh -c "for l in '$core' '$mpi'; do [ -f \"\$l\" ] || continue; ! readelf -d \"\$l\" | grep -q 'NEEDED.*libsodium' || exit 1; ! nm -D --defined-only \"\$l\" | grep -Eq ' (crypto_|sodium_|randombytes)' || exit 1; nm \"\$l\" | grep -q ' t crypto_auth_hmacsha512256\$' || exit 1; done"
tap_done
