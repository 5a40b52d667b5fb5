#!/bin/sh
# desync-fuzz.sh - fuzzes the side channel's message parser (libFuzzer with
# AddressSanitizer) for DSX_FUZZ_SECONDS (default 10), starting from a
# corpus of valid messages written by the encoder; then, as long again, the
# bytes of a TCP connection with the job's key in place (the handshake and
# sealed frames, fuzz_conn.c).
. "$top_srcdir/tests/tap.sh"
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || tap_skip_all "clang not installed (libFuzzer needs clang -fsanitize=fuzzer)"
S="$top_srcdir/src"
BIN="$CCS_TMP/fuzz_proto"
if ! "$CLANG" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$S/core" -I"$S/desync" -I"$top_builddir" \
        "$top_srcdir/tests/desync/fuzz_proto.c" "$S/desync/desync_proto.c" "$S/core/fingerprint.c" "$S/core/names.c" \
        -o "$BIN" >"$CCS_TMP/build.log" 2>&1; then
    tap_skip_all "libFuzzer is not available with $CLANG ($(head -1 "$CCS_TMP/build.log"))"
fi
BIN2="$CCS_TMP/fuzz_conn"
if ! "$CLANG" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$S/core" -I"$S/desync" -I"$top_builddir" \
        "$top_srcdir/tests/desync/fuzz_conn.c" "$S/desync/desync_conn.c" "$S/desync/desync_auth.c" "$S/desync/desync_proto.c" \
        "$S/core/clock.c" "$S/core/fingerprint.c" "$S/core/names.c" -lsodium -o "$BIN2" >"$CCS_TMP/build2.log" 2>&1; then
    tap_skip_all "the connection fuzzer does not build with $CLANG and -lsodium ($(head -1 "$CCS_TMP/build2.log"))"
fi
tap_plan 4
mkdir -p "$CCS_TMP/corpus"
# Seeds: the header of a STATUS frame with one empty status, and zeros.
printf '\001\000\000\000CCSD' >"$CCS_TMP/corpus/seed1"
head -c 600 /dev/zero >"$CCS_TMP/corpus/seed2"
secs=${DSX_FUZZ_SECONDS:-10}
"$BIN" -max_total_time="$secs" -rss_limit_mb=1024 -print_final_stats=1 "$CCS_TMP/corpus" >"$CCS_TMP/fuzz.log" 2>&1
rc=$?
tap_eq "no crash, leak or undefined behaviour in ${secs}s of fuzzing" 0 "$rc"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$CCS_TMP/fuzz.log")
tap_check "the fuzzer ran (${runs:-0} inputs)" test "${runs:-0}" -gt 1000
[ "$rc" -eq 0 ] || tail -30 "$CCS_TMP/fuzz.log" | tap_diag
# The connection with the job's key in place (fuzz_conn.c): the handshake
# and sealed frames, seeded with a HELLO's header and a STATUS frame's.
mkdir -p "$CCS_TMP/corpus2"
{ printf 'CCSD\003\000\001\000\240\000\000\000'; head -c 160 /dev/zero; } >"$CCS_TMP/corpus2/hello"
{ printf 'CCSD\003\000\003\000\040\000\000\000'; head -c 32 /dev/zero; } >"$CCS_TMP/corpus2/status"
"$BIN2" -max_total_time="$secs" -rss_limit_mb=1024 -print_final_stats=1 "$CCS_TMP/corpus2" >"$CCS_TMP/fuzz2.log" 2>&1
rc=$?
tap_eq "the connection with the key in place: no crash, leak or undefined behaviour in ${secs}s" 0 "$rc"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$CCS_TMP/fuzz2.log")
tap_check "the connection fuzzer ran (${runs:-0} inputs)" test "${runs:-0}" -gt 1000
[ "$rc" -eq 0 ] || tail -30 "$CCS_TMP/fuzz2.log" | tap_diag
tap_done
