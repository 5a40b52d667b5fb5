#!/bin/sh
# audit-sites.sh - ccshim-audit names each call by its own line: a real
# 2-rank MPI run of tests/audit/sites.c, built -O0 -g and -O2 -g, whose
# broadcast, all-reduces, inlined wrapper and last call of a loop body are
# on lines marked in the source.  Every output that names sites is checked
# against those lines: --json's sites, --tsv-records' `where`, the Chrome
# trace's events, the HTML report's call-site rows, the OTF2 archive's
# events (their "site" and SOURCE_CODE_LOCATION attributes, as otf2-print
# reads them) and the table.  (Before the fix the return address itself
# was looked up: at -O2 the broadcast took the next line, the loop's last
# call the loop header, and the inlined wrapper's call the helper's line.)
. "$top_srcdir/tests/tap.sh"
SRC="$top_srcdir/tests/audit/sites.c"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
ccs_have_mpi || tap_skip_all "MPI not built"
[ -n "${MPICC:-}" ] && command -v "$MPICC" > /dev/null 2>&1 || tap_skip_all "no MPI compiler (MPICC)"
grep -q '^#define HAVE_ELFUTILS_LIBDWFL_H 1' "$top_builddir/config.h" ||
    tap_skip_all "built without libdw (elfutils): call sites are not named by line"
tap_plan 19
D=$CCS_TMP
OTF2=
grep -q '^#define HAVE_OTF2 1' "$top_builddir/config.h" && command -v otf2-print > /dev/null 2>&1 && OTF2=1

line() { grep -n "/\* @$1 \*/" "$SRC" | cut -d: -f1; }
B=$(line bcast) F=$(line first) W=$(line wrapper) I=$(line inner) L=$(line last)
# What every output must say, by calls per rank (directories left out).
expect_sites() {
    printf '%s\n' "1 bcast main at sites.c:$B" "1 allreduce main at sites.c:$F" \
        "3 allreduce main at sites.c:$W (inlined reduce_checked at sites.c:$I)" \
        "3 allreduce main at sites.c:$L" | sort
}
# "/dir/sites.c" -> "sites.c" wherever a path is printed
strip_dirs() { sed 's#/[^ :"]*/##g'; }
# The OTF2 source code locations: the call's own line, main's for the inlined wrapper.
expect_lines() {
    printf '%s\n' "1 bcast sites.c:$B" "1 allreduce sites.c:$F" "3 allreduce sites.c:$W" "3 allreduce sites.c:$L" |
        sort
}

for opt in O0 O2; do
    "$MPICC" -"$opt" -g -o "$D/sites-$opt" "$SRC" 2> "$D/cc-$opt.err"
    tap_eq "-$opt -g: built" 0 $?
    ccs_mpirun 60 2 "$CCSHIM_RUN" --trace-dir "$D/t$opt" -- "$D/sites-$opt" > "$D/run-$opt.out" 2>&1
    tap_eq "-$opt -g: 2-rank run exits 0" 0 $?

    "$CCSHIM_AUDIT" --json --chrome-trace "$D/$opt.chrome.json" --html "$D/$opt.html" ${OTF2:+--otf2 "$D/$opt.otf2"} \
        "$D/t$opt" > "$D/$opt.json" 2> "$D/$opt.err"
    tap_eq "-$opt -g: --json sites: the call's own line, the inlined wrapper by main's line" "$(expect_sites)" \
        "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["sites"]:
    print(s["count"] // 2, ",".join(s["kinds"]), s["name"])' "$D/$opt.json" | strip_dirs | sort)"

    "$CCSHIM_AUDIT" --tsv-records "$D/t$opt" > "$D/$opt.rec"
    tap_eq "-$opt -g: --tsv-records where, per call of rank 0" "$(expect_sites)" \
        "$(awk -F'\t' '$1 == 0 {print $4 "\t" $14}' "$D/$opt.rec" | sort | uniq -c |
            awk -F'\t' '{split($1, a, " "); print a[1], a[2], $2}' | strip_dirs | sort)"

    tap_eq "-$opt -g: Chrome trace events carry the same names (rank 0)" "$(expect_sites)" \
        "$(python3 -c '
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
n = collections.Counter((e["name"], e["args"]["site"]) for e in ev
                        if e.get("ph") == "X" and e.get("cat") == "mpi" and e["tid"] == 0)
for (k, s), c in n.items():
    print(c, k, s)' "$D/$opt.chrome.json" | strip_dirs | sort)"

    # The HTML's call-site rows, all ranks: calls, bytes, deferred, (time,
    # wait,) kinds, site.
    tap_eq "-$opt -g: HTML call-site rows name the same lines" \
        "$(printf '%s\n' "2|64 B|0|bcast|main at sites.c:$B" "2|64 B|0|allreduce|main at sites.c:$F" \
            "6|192 B|0|allreduce|main at sites.c:$W (inlined reduce_checked at sites.c:$I)" \
            "6|192 B|0|allreduce|main at sites.c:$L" | sort)" \
        "$(sed -n 's#^<tr class="site"><td class="n">\([0-9]*\)</td><td class="n">\([^<]*\)</td><td class="n">\([0-9]*\)</td><td class="n">[^<]*</td><td class="n">[^<]*</td><td>\([^<]*\)</td><td>\([^<]*\)</td><td class="pat">.*#\1|\2|\3|\4|\5#p' \
            "$D/$opt.html" | strip_dirs | sort)"

    if [ -n "$OTF2" ]; then
        # Each call's Enter (rank 0's location), its region, then its attributes' line.
        otf2-print "$D/$opt.otf2/traces.otf2" 2> "$D/$opt.otf2.err" |
            awk '$1 == "ENTER" && $2 == 0 && !/Region: "step"/ { r = $0; getline a; print r "\t" a }' > "$D/$opt.enter"
        tap_eq "-$opt -g: OTF2 events carry the same names (attribute site, rank 0)" "$(expect_sites)" \
            "$(sed -n 's/^ENTER .*Region: "\([^"]*\)".*("site" <[0-9]*>; STRING; "\([^"]*\)" <[0-9]*>).*/\1 \2/p' \
                "$D/$opt.enter" | sort | uniq -c | awk '{ $1 = $1; print }' | strip_dirs | sort)"
        tap_eq "-$opt -g: OTF2 events' source code locations: the call's file and line (rank 0)" "$(expect_lines)" \
            "$(sed -n 's/^ENTER .*Region: "\([^"]*\)".*("SOURCE_CODE_LOCATION" <[0-9]*>; SOURCE_CODE_LOCATION; "\([^"]*\)" <[0-9]*>).*/\1 \2/p' \
                "$D/$opt.enter" | sort | uniq -c | awk '{ $1 = $1; print }' | strip_dirs | sort)"
    else
        tap_skip "-$opt -g: OTF2 events carry the same names" "built without OTF2, or no otf2-print (otf2-tools)"
        tap_skip "-$opt -g: OTF2 events' source code locations" "built without OTF2, or no otf2-print (otf2-tools)"
    fi
done

"$CCSHIM_AUDIT" "$D/tO2" > "$D/O2.txt"
tap_eq "table: the broadcast's line and the loop's last call's line" "2 6" \
    "$(grep -c "main at sites.c:$B \[bcast\]\|main at sites.c:$F \[allreduce\]" "$D/O2.txt") $(grep "main at sites.c:$L \[allreduce\]" "$D/O2.txt" | awk '{print $1}')"
tap_eq "table: no site names a line that holds no call" 0 \
    "$(sed -n '/^top call sites/,$p' "$D/O2.txt" | grep -v "sites.c:\($B\|$F\|$W\|$L\)\b" | grep -c 'sites.c:')"

# The reference trainer: its gradient all-reduce is named by the line of the
# in-place MPI_Allreduce in tr_comm_allreduce_sum (it read "checked at
# tr_comm_mpi.c:27", the error-check helper inlined after the call).
TSRC="$top_srcdir/tools/trainer/tr_comm_mpi.c"
TL=$(grep -n 'rc = MPI_Allreduce(MPI_IN_PLACE, buf' "$TSRC" | cut -d: -f1)
if [ -x "$CCSHIM_TRAINER" ]; then
    ccs_mpirun 60 2 "$CCSHIM_RUN" --trace-dir "$D/tr" -- "$CCSHIM_TRAINER" --batch 32 --mini-batch 4 --steps 1 \
        > "$D/tr.out" 2>&1
    tap_eq "trainer: its all-reduce site is the call's line (tr_comm_mpi.c:$TL)" \
        "tr_comm_allreduce_sum at tr_comm_mpi.c:$TL" \
        "$("$CCSHIM_AUDIT" --json "$D/tr" 2> /dev/null | python3 -c '
import json, sys
print("\n".join(s["name"] for s in json.load(sys.stdin)["sites"] if "allreduce" in s["kinds"]))' | strip_dirs | sort -u)"
else
    tap_skip "trainer: its all-reduce site is the call's line" "ccshim-trainer not built"
fi
tap_done
