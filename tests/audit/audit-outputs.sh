#!/bin/sh
# audit-outputs.sh - ccshim-audit's --chrome-trace (valid Trace Event JSON:
# one track per rank, one slice per call, step slices) and --html (a
# self-contained page, opened in headless Chromium and checked through the
# DOM after its script ran; a screenshot is kept in the build directory).
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
command -v python3 > /dev/null 2>&1 || tap_skip_all "python3 (JSON checks) not installed"
tap_plan 14
D=$CCS_TMP

"$MKTRACE" --ranks 4 --steps 3 --micro 8 "$D/j"
"$CCSHIM_AUDIT" --chrome-trace "$D/j.trace.json" --html "$D/report.html" "$D/j" > /dev/null; rc=$?
tap_eq "both files written, exit 0" "0 yes yes" \
    "$rc $([ -s "$D/j.trace.json" ] && echo yes) $([ -s "$D/report.html" ] && echo yes)"
tap_check "chrome trace is valid JSON" python3 -m json.tool "$D/j.trace.json" /dev/null
# per rank: 1 broadcast + 3 x (8 x 2 + 1) calls, 3 step slices, 3 step marks
tap_eq "chrome trace: calls steps marks tracks" "208 12 12 4" \
    "$(python3 "$top_srcdir/tests/audit/check_chrome.py" "$D/j.trace.json")"
tap_eq "chrome trace: deferred and sites in args" "allreduce tg_site_reducer_allreduce_bucket" \
    "$(python3 -c '
import json,sys
e=[x for x in json.load(open(sys.argv[1]))["traceEvents"] if x["ph"]=="X" and x.get("cat")=="mpi"][1]
print(e["name"], e["args"]["site"].split(" ")[0])' "$D/j.trace.json")"

"$CCSHIM_AUDIT" --chrome-trace "$D/s1.json" --chrome-steps 1 "$D/j" > /dev/null
# step 1 only: 4 ranks x 17 calls, 4 step slices, the marks that open and close it
tap_eq "--chrome-steps 1: calls steps marks tracks" "68 4 8 4" \
    "$(python3 "$top_srcdir/tests/audit/check_chrome.py" "$D/s1.json")"

H=$D/report.html
tap_eq "html: no external resources" 0 "$(grep -Ec '(src|href)=|https?://' "$H")"
tap_eq "html: one chart bar per step and rank" 12 "$(grep -c '<rect class="bar' "$H")"
tap_eq "html: the redundancy finding with k" 1 "$(grep -c 'data-kind="redundant-reduction" data-severity="warning" data-k="8"' "$H")"
tap_check "html: call-site table" grep -q '<tr class="site"><td class="n">192</td><td class="n">3.3 GiB</td>' "$H"

CHROMIUM=
for c in chromium chromium-browser google-chrome; do
    command -v "$c" > /dev/null 2>&1 && { CHROMIUM=$c; break; }
done
if [ -z "$CHROMIUM" ]; then
    for t in "html: script ran in the browser" "html: chart in the DOM" "html: findings in the DOM" \
        "html: screenshot" "html: screenshot is a PNG"; do
        tap_skip "$t" "chromium not installed (Debian package: chromium)"
    done
    tap_done
    exit $?
fi
# Root needs --no-sandbox; a private profile keeps runs apart.
CHROME_FLAGS="--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=$D/profile"
ccs_run_timeout 90 "$CHROMIUM" $CHROME_FLAGS --dump-dom "file://$H" > "$D/dom.html" 2> "$D/chromium.err"
tap_check "html: script ran in the browser" grep -q '<span id="js-summary">12 bars, 192 reductions shown, 1 findings.</span>' "$D/dom.html"
tap_eq "html: chart in the DOM" 12 "$(grep -o '<rect class="bar[^"]*" data-step' "$D/dom.html" | wc -l | tr -d ' ')"
tap_eq "html: findings in the DOM" 1 "$(grep -o '<li class="finding sev-warning" data-kind="redundant-reduction"' "$D/dom.html" | wc -l | tr -d ' ')"
PNG="$top_builddir/tests/audit/report.png"
mkdir -p "$top_builddir/tests/audit"
rm -f "$PNG"
ccs_run_timeout 90 "$CHROMIUM" $CHROME_FLAGS --hide-scrollbars --window-size=1200,1400 --screenshot="$PNG" \
    "file://$H" > /dev/null 2>> "$D/chromium.err"
tap_check "html: screenshot" test -s "$PNG"
tap_eq "html: screenshot is a PNG" "PNG" "$(head -c 4 "$PNG" 2>/dev/null | tail -c 3)"
tap_done
