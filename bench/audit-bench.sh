#!/bin/sh
# bench/audit-bench.sh - how fast, and in how much memory, ccshim-audit
# summarises a trace directory: a ~1 GiB job of 64 ranks, and a job of 2048
# ranks.  Traces come from the test generator (tests/audit/mktrace).  Writes
# its figures into docs/performance.md between <!-- BEGIN audit --> and
# <!-- END audit -->.  CCSHIM_BENCH_AUDIT_STEPS scales the big job (default
# 2900 steps: 64 ranks x 2900 x 65 calls x 88 B = 1.0 GiB).
set -eu
: "${top_srcdir:?run through make bench}" "${top_builddir:?run through make bench}"
. "$top_srcdir/bench/lib.sh"
AUDIT="$top_builddir/ccshim-audit"
MKTRACE="$top_builddir/tests/audit/mktrace"
DOC="$top_srcdir/docs/performance.md"
STEPS=${CCSHIM_BENCH_AUDIT_STEPS:-2900}
T=$(mktemp -d "${TMPDIR:-/tmp}/ccshim-audit-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
[ -x "$AUDIT" ] && [ -x "$MKTRACE" ] || { echo "audit-bench: build ccshim-audit and tests/audit/mktrace first"; exit 1; }

# secs_rss CMD...: runs CMD (stdout discarded), prints "SECONDS MAX_RSS_KB".
secs_rss() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%e %M" -o "$T/time" "$@" > /dev/null
        cat "$T/time"
    else
        s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N)
        echo "$(echo "$e - $s" | bc) ?"
    fi
}

"$MKTRACE" --ranks 64 --steps "$STEPS" --micro 32 "$T/big"
BYTES=$(du -sb "$T/big" | cut -f1)
CALLS=$((64 * (1 + STEPS * 65)))
cat "$T"/big/*.cctrace > /dev/null # warm the page cache: measure the tool, not the disk
set -- $(secs_rss "$AUDIT" --tsv "$T/big"); TSV_S=$1; TSV_KB=$2
set -- $(secs_rss "$AUDIT" "$T/big"); TAB_S=$1; TAB_KB=$2
set -- $(secs_rss "$AUDIT" --json --chrome-trace "$T/big.trace.json" --html "$T/big.html" "$T/big"); ALL_S=$1; ALL_KB=$2
CHROME_MB=$(( $(stat -c %s "$T/big.trace.json") / 1048576 ))
rm -f "$T/big.trace.json"
rm -rf "$T/big"

"$MKTRACE" --ranks 2048 --steps 50 --micro 4 "$T/wide"
WBYTES=$(du -sb "$T/wide" | cut -f1)
cat "$T"/wide/*.cctrace > /dev/null
set -- $(secs_rss "$AUDIT" "$T/wide"); WIDE_S=$1; WIDE_KB=$2
rm -rf "$T/wide"

mbps() { echo "$1 $2" | awk '{ if ($2 > 0) printf "%.0f", $1 / 1048576 / $2; else print "-" }'; }
CPU=$(bench_cpu)
{
    echo "## ccshim-audit: summarising a trace directory"
    echo
    echo "Measured by \`make bench\` (bench/audit-bench.sh) on $(date -u +%Y-%m-%d), $(nproc) cores ($CPU),"
    echo "traces from the test generator (tests/audit/mktrace), page cache warm."
    echo
    echo "| job | traces | calls | what | time | throughput | peak memory |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    echo "| 64 ranks x $STEPS steps, per-mini-batch (32 x 2 buckets) | $((BYTES / 1048576)) MiB | $CALLS | --tsv (counts only) | ${TSV_S} s | $(mbps "$BYTES" "$TSV_S") MiB/s | $((TSV_KB / 1024)) MiB |"
    echo "| same | | | table (patterns, findings, addr2line) | ${TAB_S} s | $(mbps "$BYTES" "$TAB_S") MiB/s | $((TAB_KB / 1024)) MiB |"
    echo "| same | | | --json + --chrome-trace ($CHROME_MB MiB) + --html | ${ALL_S} s | $(mbps "$BYTES" "$ALL_S") MiB/s | $((ALL_KB / 1024)) MiB |"
    echo "| 2048 ranks x 50 steps (4 x 2 buckets) | $((WBYTES / 1048576)) MiB | $((2048 * (1 + 50 * 9))) | table | ${WIDE_S} s | $(mbps "$WBYTES" "$WIDE_S") MiB/s | $((WIDE_KB / 1024)) MiB |"
    echo
    echo "Memory grows with ranks x steps x kinds (the per-step table), not with the calls:"
    echo "records are folded as they stream past; only the first rank keeps its calls (capped) for"
    echo "the patterns.  The Chrome trace holds one event per call and is the slowest output."
} > "$T/section"

bench_write_section "$DOC" audit < "$T/section"
cat "$T/section"
