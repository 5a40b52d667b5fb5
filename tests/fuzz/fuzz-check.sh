#!/bin/sh
# fuzz-check.sh - runs each libFuzzer target of tests/fuzz (docs/fuzzing.md)
# for CCSHIM_FUZZ_SECONDS (default 3) over its corpus, tests/fuzz/corpus/
# <target> (seeds and every input that once found a bug, all of which run
# first): one point per target, ok when it ran without a crash, leak,
# undefined behaviour or hang.  A target that was not built (configure found
# no clang linking -fsanitize=fuzzer) is skipped with that reason.
#   CCSHIM_FUZZ_ONLY   space-separated targets to run (default: all)
#   CCSHIM_FUZZ_KEEP   directory keeping the new inputs found, per target
#                      (make fuzz: tests/fuzz/found in the build)
# A failing input is copied to tests/fuzz/ of the build directory.
. "$top_srcdir/tests/tap.sh"
SECS=${CCSHIM_FUZZ_SECONDS:-3}
TARGETS="fuzz_trace fuzz_dsx_proto fuzz_dsx_coord fuzz_dsx_client fuzz_config fuzz_expect"
[ -n "${CCSHIM_FUZZ_ONLY:-}" ] && TARGETS=$CCSHIM_FUZZ_ONLY
set -- $TARGETS
tap_plan $#
for t in $TARGETS; do
    bin=$top_builddir/tests/fuzz/$t
    seeds=$top_srcdir/tests/fuzz/corpus/$t
    if [ ! -x "$bin" ]; then
        tap_skip "$t" "not built: configure found no clang that links -fsanitize=fuzzer (its summary: libFuzzer)"
        continue
    fi
    if [ ! -d "$seeds" ]; then
        tap_not_ok "$t: no corpus in $seeds"
        continue
    fi
    # Inputs as large as the targets' formats need: a trace of a few
    # chunks, a handshake and a few sealed statuses, settings, a rule.
    case $t in
    fuzz_trace) max=65536 ;;
    fuzz_dsx_*) max=32768 ;;
    fuzz_config) max=4096 ;;
    *) max=512 ;;
    esac
    work=$CCS_TMP/$t
    [ -n "${CCSHIM_FUZZ_KEEP:-}" ] && work=$CCSHIM_FUZZ_KEEP/$t
    mkdir -p "$work" "$CCS_TMP/art-$t"
    nseeds=$(ls "$seeds" | wc -l)
    ccs_run_timeout $((SECS + 120)) "$bin" -max_total_time="$SECS" -max_len=$max -timeout=20 -rss_limit_mb=2560 \
        -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$CCS_TMP/art-$t/" "$work" "$seeds" \
        >"$CCS_TMP/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$CCS_TMP/$t.log")
    if [ "$rc" = 0 ] && [ "${runs:-0}" -ge "$nseeds" ]; then
        tap_ok "$t: ${runs} executions in ${SECS}s (its corpus: $nseeds inputs), no crash, leak, undefined behaviour or hang"
    else
        tap_not_ok "$t: exit $rc after ${runs:-0} executions"
        grep -E "ERROR|SUMMARY|runtime error|Test unit written|^    #[0-9]" "$CCS_TMP/$t.log" | head -30 | tap_diag
        for a in "$CCS_TMP/art-$t"/*; do
            [ -f "$a" ] || continue
            cp "$a" "$top_builddir/tests/fuzz/$t-$(basename "$a")" && echo "# kept $top_builddir/tests/fuzz/$t-$(basename "$a")"
        done
    fi
done
tap_done
