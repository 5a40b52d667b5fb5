#!/bin/sh
# audit-time.sh - how much time: ccshim-audit's time in collectives and
# wait (a rank's time in a call beyond the fastest rank's for the same
# call), per step, rank and call site, with the share of the run time, and
# what coalescing saved, on synthetic traces whose times are known exactly
# (mktrace: a bucket reduction lasts 2000 ns + bytes / 1000; --late R:NS
# makes every other rank's bucket reductions NS longer, waiting for R; a
# deferred one lasts 800 ns).
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
tap_plan 12
D=$CCS_TMP

# 3 ranks, 2 steps of two bucket reductions (25 MiB: 28214 ns, 9.7 MiB:
# 12171 ns) and an all-gather; ranks 0 and 2 wait 1 ms for rank 1 in each.
"$MKTRACE" --ranks 3 --steps 2 --late 1:1000000 "$D/lt"
"$CCSHIM_AUDIT" --tsv-time "$D/lt" > "$D/lt.tsv"
tap_eq "--tsv-time: each step and rank, then the totals (wait: 2 x 1 ms a step on ranks 0 and 2, none on 1)" \
    "#step rank collectives_ns wait_ns|0 0 2044585 2000000|0 1 44585 0|0 2 2044585 2000000|1 0 2041585 2000000|1 1 41585 0|1 2 2041585 2000000|#total rank collectives_ns wait_ns run_ns|total 0 4086170 4000000 4190770|total 1 86170 0 190770|total 2 4086170 4000000 4190770" \
    "$(sed '/^#site/,$d' "$D/lt.tsv" | tr '\t' ' ' | paste -sd'|')"
# Per call site, the most time first: its time and wait, all ranks' run time
# summed (4190770 + 190770 + 4190770: the shares' denominator), its name.
tap_eq "--tsv-time: each call site's time and wait (the buckets' 8 ms of wait first), then coalescing (none)" \
    "#site collectives_ns wait_ns run_ns where|site 8242310 8000000 8572310 tg_site_reducer_allreduce_bucket at tracegen.c:22|site 9000 0 8572310 tg_site_broadcast_params at tracegen.c:30|site 7200 0 8572310 tg_site_gather_loss at tracegen.c:26|#coalescing deferred measured saved_ns|coalescing 0 0 -" \
    "$(sed -n '/^#site/,$p' "$D/lt.tsv" | sed 's#/[^ :]*/##g' | tr '\t' ' ' | paste -sd'|')"
"$CCSHIM_AUDIT" "$D/lt" > "$D/lt.txt"
tap_eq "table: the ranks' time, wait and shares of their run time" \
    "         0       4.2 ms         4.1 ms   97.5%       4.0 ms   95.4%|         1     190.8 us        86.2 us   45.2%         0 ns    0.0%|         2       4.2 ms         4.1 ms   97.5%       4.0 ms   95.4%" \
    "$(sed -n '/^      rank     run time/,/^  the step/p' "$D/lt.txt" | sed '1d;$d' | paste -sd'|')"
tap_eq "table: the steps with the most wait, the rank waiting most" \
    "         0         4.1 ms       4.0 ms  rank 0, 2.0 ms|         1         4.1 ms       4.0 ms  rank 0, 2.0 ms" \
    "$(sed -n '/^      step    collectives/,/^  call sites/p' "$D/lt.txt" | sed '1d;$d' | paste -sd'|')"
tap_eq "table: the call site with the most time and wait first" \
    "          8.2 ms   96.2%       8.0 ms   93.3%  tg_site_reducer_allreduce_bucket at tracegen.c:22" \
    "$(grep -A1 '^     collectives   share         wait   share  site$' "$D/lt.txt" | tail -1)"
"$CCSHIM_AUDIT" --json "$D/lt" > "$D/lt.json"
tap_eq "--json: the site's time and wait, every rank's, step 1's" \
    "8242310 8000000|4086170 4000000 86170 0 4086170 4000000|2041585 2000000 41585 0 2041585 2000000" \
    "$(json_q "$D/lt.json" '"%d %d|%s|%s" % (d["sites"][0]["time_ns"], d["sites"][0]["wait_ns"], " ".join("%d %d" % (r["collectives_ns"], r["wait_ns"]) for r in d["time"]["ranks"]), " ".join("%d %d" % (r["collectives_ns"], r["wait_ns"]) for r in d["time"]["steps"][1]["ranks"]))')"
"$CCSHIM_AUDIT" --html "$D/lt.html" "$D/lt" > /dev/null
tap_eq "html: the time chart (a cell per step and rank, ranks labelled), the ranks' table" "6 rank 0|rank 1|rank 2 3" \
    "$(grep -c '^<g data-step="[0-9]" data-rank="[0-2]" data-time-ns=' "$D/lt.html") $(grep -o '<text class="rank-label"[^>]*>rank [0-9]' "$D/lt.html" | sed 's/.*>//' | paste -sd'|') $(sed -n '/<table id="time">/,/<\/table>/p' "$D/lt.html" | grep -c '^<tr>')"

# Coalescing from step 1 on (4 mini-batches: 3 of 4 reductions deferred):
# step 0 made the same reductions for real, the measure; each deferred one
# saved (28214 - 800) or (12171 - 800) ns: 24 x ... = 465420 ns.
"$MKTRACE" --ranks 2 --steps 3 --micro 4 --deferred-from 1 "$D/df"
"$CCSHIM_AUDIT" --json "$D/df" > "$D/df.json"
tap_eq "coalescing measured against the same reductions made for real: saved 465420 ns" "24 24 465420" \
    "$(json_q "$D/df.json" '"%d %d %d" % (d["time"]["coalescing"]["deferred"], d["time"]["coalescing"]["measured"], d["time"]["coalescing"]["saved_ns"])')"
tap_eq "--tsv-time: saved, as --json says it" "coalescing 24 24 465420" \
    "$("$CCSHIM_AUDIT" --tsv-time "$D/df" | grep '^coalescing' | tr '\t' ' ')"
tap_eq "table: saved, and how it was measured" \
    "  coalescing saved 465.4 us: 24 deferred reductions, each the mean time of the same reduction made|    for real in this job, less its own" \
    "$("$CCSHIM_AUDIT" "$D/df" | grep -A1 '^  coalescing saved' | paste -sd'|')"
# Coalescing from the start: no real twin, nothing claimed.
"$MKTRACE" --ranks 2 --steps 3 --micro 2 --deferred "$D/d0"
tap_eq "no real twin: not claimed (table, --json null)" \
    "  coalescing deferred 12 reductions; the time saved is not claimed: this job made none of them for|    real to measure it against|None" \
    "$("$CCSHIM_AUDIT" "$D/d0" | grep -A1 '^  coalescing deferred' | paste -sd'|')|$("$CCSHIM_AUDIT" --json "$D/d0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["time"]["coalescing"]["saved_ns"])')"
tap_eq "no real twin: --tsv-time's saved_ns is -, not 0" "coalescing 12 0 -" \
    "$("$CCSHIM_AUDIT" --tsv-time "$D/d0" | grep '^coalescing' | tr '\t' ' ')"
tap_done
