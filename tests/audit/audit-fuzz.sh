#!/bin/sh
# audit-fuzz.sh - a short libFuzzer run of the trace reader and the audit
# (tests/audit/fuzz_trace.c), seeded with generated traces.  Needs clang with
# libFuzzer; skips with the reason otherwise.  CCSHIM_FUZZ_SECONDS sets the
# length (default 10).
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
SECS=${CCSHIM_FUZZ_SECONDS:-10}
CLANG=${CLANG:-clang}
command -v "$CLANG" > /dev/null 2>&1 || tap_skip_all "clang not installed (libFuzzer needs clang)"
S=$top_srcdir
FUZZ="$top_builddir/tests/audit/fuzz_trace"
mkdir -p "$top_builddir/tests/audit"
SRCS="$S/tests/audit/fuzz_trace.c $S/src/trace/trace_reader.c $S/src/core/names.c"
for f in "$S"/tools/audit/*.c; do
    case $f in */main.c) ;; *) SRCS="$SRCS $f" ;; esac
done
# out_otf2.c needs libotf2 when the build found it.
OTF2_LIBS=
grep -q '^#define HAVE_OTF2 1' "$top_builddir/config.h" && OTF2_LIBS=$(pkg-config --libs otf2)
# Rebuild when a source is newer than the binary.
stale=1
if [ -x "$FUZZ" ]; then
    stale=0
    for f in $SRCS "$S"/tools/audit/*.h "$S"/src/trace/trace_reader.h "$S"/src/core/trace_format.h; do
        [ "$f" -nt "$FUZZ" ] && stale=1
    done
fi
if [ "$stale" = 1 ]; then
    # config.h for PACKAGE_VERSION comes from the build directory.
    if ! "$CLANG" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -I"$S/src/core" -I"$S/src/trace" -I"$S/include" -I"$S/tools/audit" -I"$top_builddir" \
        -o "$FUZZ" $SRCS $OTF2_LIBS > "$CCS_TMP/build.log" 2>&1; then
        sed 's/^/# /' "$CCS_TMP/build.log" | head -20
        tap_skip_all "clang cannot build a libFuzzer target here (see the log above)"
    fi
fi
tap_plan 2
C=$CCS_TMP/corpus
mkdir -p "$C" "$CCS_TMP/gen"
"$MKTRACE" --ranks 1 --steps 2 --micro 2 --desync 0:1 "$CCS_TMP/gen/a"
"$MKTRACE" --ranks 1 --steps 3 --micro 1 --no-markers --deferred "$CCS_TMP/gen/b"
i=0
for f in "$CCS_TMP"/gen/*/*.cctrace; do i=$((i + 1)); cp "$f" "$C/seed$i"; done
for k in newer-version other-byteorder truncated-header damaged-chunk; do "$MKTRACE" --broken $k "$C/$k"; done
tap_eq "corpus seeded with generated traces" 6 "$(ls "$C" | wc -l | tr -d ' ')"
( cd "$CCS_TMP" && ccs_run_timeout $((SECS + 60)) "$FUZZ" -max_total_time="$SECS" -rss_limit_mb=2048 \
    -max_len=65536 -timeout=10 "$C" > "$CCS_TMP/fuzz.log" 2>&1 )
rc=$?
tail -5 "$CCS_TMP/fuzz.log" | tap_diag
if [ "$rc" != 0 ]; then
    grep -E "ERROR|SUMMARY|crash-|Test unit written" "$CCS_TMP/fuzz.log" | head -10 | tap_diag
    cp "$CCS_TMP"/crash-* "$CCS_TMP"/leak-* "$CCS_TMP"/timeout-* "$top_builddir/tests/audit/" 2>/dev/null
fi
tap_eq "libFuzzer ran ${SECS}s without a crash, leak or hang" 0 "$rc"
rm -f /tmp/ccshim-fuzz-*.cctrace
tap_done
