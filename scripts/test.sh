#!/usr/bin/env bash
# scripts/test.sh - set up (setup.sh), then run every test (`make check`) and
# end with one line "N passed, N failed, N skipped" counted over every test
# point (each Check test case and each TAP line of the shell tests).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${CCSHIM_BUILD:-$top/_build}
"$top/scripts/setup.sh" || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
cd "$build"
make -j"$(nproc)" check >check.out 2>&1
rc=$?
# Tests that time detection (latency bounds, abort within N s, ranks that
# must exit) share 2 cores with everything else; a test that failed is run
# again, alone, up to twice, and every result is shown: a real fault fails
# every time (nccl-completion's hang scenario misses intermittently: #13).
if [ "$rc" -ne 0 ] && [ -f test-suite.log ]; then
    echo "first run: $(grep -cE '^(FAIL|ERROR):' check.out) failing point(s); re-running the failed tests once:"
    grep -E '^(FAIL|ERROR):' check.out | sed 's/^/  first run: /'
    for try in 1 2; do
        make recheck >recheck.out 2>&1
        rc=$?
        cat recheck.out >>check.out
        [ "$rc" -eq 0 ] && break
        echo "re-run $try: $(grep -cE '^(FAIL|ERROR):' recheck.out) failing point(s) still"
    done
fi
grep -E '^(FAIL|ERROR|XPASS):' check.out || true
log=test-suite.log
# Every test point's result, from each test's .trs file (after a re-run
# test-suite.log covers only the re-run tests; the .trs files cover all).
trs=$(find . -name '*.trs' 2>/dev/null)
count() { [ -n "$trs" ] && cat $trs | awk -v k="$1" '$1==":test-result:" && $2==k {n++} END {print n+0}'; }
pass=$(count PASS); fail=$(count FAIL); err=$(count ERROR); skip=$(count SKIP); xfail=$(count XFAIL); xpass=$(count XPASS)
pass=$(( ${pass:-0} + ${xfail:-0} )); fail=$(( ${fail:-0} + ${err:-0} + ${xpass:-0} )); skip=${skip:-0}
if [ ! -f "$log" ]; then tail -40 check.out; fail=$((fail + 1)); fi
sed -n '/^=\+$/,/^=\+$/p' check.out | head -20
echo "test logs: $build/test-suite.log"
echo "$pass passed, $fail failed, $skip skipped"
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ]
