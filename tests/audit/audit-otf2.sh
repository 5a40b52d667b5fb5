#!/bin/sh
# audit-otf2.sh - ccshim-audit --otf2 DIR: the archive that otf2-print
# (Debian: otf2-tools) reads back has one location per rank, one
# communicator definition per communicator, exactly one collective begin and
# end per collective record (as --tsv-records lists them) with its bytes and
# root, one "step" region per step and rank, and each call's Enter with its
# site (the name the other outputs give, its file and line); on synthetic
# traces and on a real 2-rank MPI run with coalescing every:8.  (The sites'
# exact lines at -O0 and -O2: audit-sites.sh.)
. "$top_srcdir/tests/tap.sh"
MKTRACE="$top_builddir/tests/audit/mktrace"
[ -x "$CCSHIM_AUDIT" ] || tap_skip_all "ccshim-audit not built"
D=$CCS_TMP
"$MKTRACE" --ranks 4 --steps 3 --micro 8 "$D/j"
if ! grep -q '^#define HAVE_OTF2 1' "$top_builddir/config.h"; then
    tap_plan 1
    "$CCSHIM_AUDIT" --otf2 "$D/o" "$D/j" > /dev/null 2> "$D/err"; rc=$?
    tap_eq "built without OTF2: --otf2 says so, exit 2" "2 1" \
        "$rc $(grep -c 'built without OTF2' "$D/err")"
    tap_done
    exit $?
fi
command -v otf2-print > /dev/null 2>&1 || tap_skip_all "otf2-print not installed (Debian package: otf2-tools)"
command -v python3 > /dev/null 2>&1 || tap_skip_all "python3 (JSON checks) not installed"
tap_plan 20

# Collective records per rank, as --tsv-records lists them: "RANK COUNT" lines.
coll_records() {
    "$CCSHIM_AUDIT" --tsv-records "$1" | awk -F '\t' '!/^#/ && $4 !~ /^(send|recv|sendrecv|comm_.*)$/ { n[$1]++ }
        END { for (r in n) print r, n[r] }' | sort -n
}
# The communicators the audit knows ("BACKEND ID" lines, sorted) and those the archive defines.
audit_comms() {
    "$CCSHIM_AUDIT" --json --no-symbols "$1" |
        python3 -c 'import json,sys; [print(c["backend"], c["id"]) for c in json.load(sys.stdin)["comms"]]' | sort
}
otf2_comms() { sed -n 's/^COMM  *[0-9][0-9]*  Name: "\([a-z]*\) comm \([0-9a-f]*\)".*/\1 \2/p' "$1" | sort; }
# Events of one type per location in otf2-print's listing: "LOCATION COUNT" lines.
otf2_events() {
    awk -v t="$1" '$1 == t { n[$2]++ } END { for (l in n) print l, n[l] }' "$2" | sort -n
}

"$CCSHIM_AUDIT" --otf2 "$D/o" "$D/j" > /dev/null 2> "$D/audit.err"; rc=$?
tap_eq "--otf2 writes DIR/traces.otf2, exit 0" "0 yes" "$rc $([ -s "$D/o/traces.otf2" ] && echo yes)"
otf2-print "$D/o/traces.otf2" > "$D/events.txt" 2> "$D/print.err"; rc=$?
tap_eq "otf2-print reads it without a warning" "0 0" "$rc $(wc -l < "$D/print.err" | tr -d ' ')"
otf2-print -G "$D/o/traces.otf2" > "$D/defs.txt" 2>> "$D/print.err"
# 4 ranks x (1 broadcast + 3 steps x (8 x 2 all-reduces + 1 all-gather))
tap_eq "one collective end per collective record, 208" \
    "208 208" "$(grep -c '^MPI_COLLECTIVE_END ' "$D/events.txt") $(coll_records "$D/j" | awk '{ s += $2 } END { print s }')"
tap_eq "per rank: collective ends = collective records" "$(coll_records "$D/j")" \
    "$(otf2_events MPI_COLLECTIVE_END "$D/events.txt")"
tap_eq "per rank: collective begins = collective records" "$(coll_records "$D/j")" \
    "$(otf2_events MPI_COLLECTIVE_BEGIN "$D/events.txt")"
tap_eq "one location per rank" "rank 0 node1|rank 1 node1|rank 2 node1|rank 3 node1" \
    "$(sed -n 's/^LOCATION  *[0-9][0-9]*  Name: "\([^"]*\)".*/\1/p' "$D/defs.txt" | paste -sd '|' -)"
tap_eq "one communicator definition per communicator" "$(audit_comms "$D/j")" "$(otf2_comms "$D/defs.txt")"
tap_check "communicator members by rank" grep -q \
    '^GROUP .*Type: COMM_GROUP, Paradigm: MPI, .*4 Members: 0 ("rank 0 node1" <0>), 1 ("rank 1 node1" <1>), 2 ("rank 2 node1" <2>), 3 ("rank 3 node1" <3>)' \
    "$D/defs.txt"
tap_eq "the broadcast's bytes and root" 4 \
    "$(grep -c '^MPI_COLLECTIVE_END .*Operation: BCAST, .*Root: 0 (.*Sent: 4194304, Received: 4194304$' "$D/events.txt")"
tap_eq "an all-reduce: no root, its bytes" 192 \
    "$(grep -c '^MPI_COLLECTIVE_END .*Operation: ALLREDUCE, .*Root: NONE, Sent: [0-9]*, Received: [0-9]*$' "$D/events.txt")"
tap_eq "one step region per step and rank (enter, leave)" "12 12" \
    "$(grep -c '^ENTER .*Region: "step"' "$D/events.txt") $(grep -c '^LEAVE .*Region: "step"' "$D/events.txt")"
tap_eq "steps numbered 0-2 on each rank" "4 4 4" \
    "$(for s in 0 1 2; do grep -c "(\"step\" <[0-9]*>; UINT32; $s)" "$D/events.txt"; done | paste -sd ' ' -)"
# Each call's Enter (the line after it holds its attributes): the site's
# name and source code location; 4 ranks x 3 sites: 208 calls.
tap_eq "every call's Enter carries its site and its file and line (208 calls, on 3 lines)" \
    "208 tg_site_broadcast_params at tracegen.c:30 tracegen.c:30|tg_site_gather_loss at tracegen.c:26 tracegen.c:26|tg_site_reducer_allreduce_bucket at tracegen.c:22 tracegen.c:22" \
    "$(awk '$1 == "ENTER" && !/Region: "step"/ { getline a; print a }' "$D/events.txt" |
        sed -n 's/.*("site" <[0-9]*>; STRING; "\([^"]*\)" <[0-9]*>), ("SOURCE_CODE_LOCATION" <[0-9]*>; SOURCE_CODE_LOCATION; "\([^"]*\)" <[0-9]*>)$/\1 \2/p' |
        sed 's#/[^ :"]*/##g' | sort | uniq -c | awk '{ n += $1; $1 = ""; l = l (l ? "|" : "") substr($0, 2) } END { print n, l }')"

"$MKTRACE" --ranks 2 --steps 2 --micro 3 --deferred "$D/def"
"$CCSHIM_AUDIT" --otf2 "$D/od" "$D/def" > /dev/null 2>&1
otf2-print "$D/od/traces.otf2" > "$D/def.txt" 2> /dev/null
tap_eq "deferred reductions: a region of their own, one per record (16)" "16 16" \
    "$("$CCSHIM_AUDIT" --tsv-records "$D/def" | awk -F '\t' '$11 ~ /deferred/' | wc -l | tr -d ' ') $(grep -c '^ENTER .*Region: "allreduce(deferred)"' "$D/def.txt")"

"$CCSHIM_AUDIT" --otf2 "$D/o" "$D/j" > /dev/null 2> "$D/again.err"; rc=$?
tap_eq "an existing archive is not overwritten: exit 2, said" "2 1" \
    "$rc $(grep -c "^ccshim-audit: $D/o: cannot write the OTF2 archive" "$D/again.err")"

# An NCCL job (the trainer over the test NCCL, host buffers): its
# communicator is an NCCL one; comm_init and comm_free are calls, not collectives.
TN="$top_builddir/ccshim-trainer-nccl"
if [ -x "$TN" ] && [ -f "$top_builddir/tests/nccl/libnccl.so.2" ]; then
    for r in 0 1; do
        LD_LIBRARY_PATH="$top_builddir/tests/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RANK=$r WORLD_SIZE=2 \
            CCSHIM_JOB_ID="otf2-$$" ccs_run_timeout 60 "$CCSHIM_RUN" --no-mpi --trace-dir "$D/nccl" -- "$TN" \
            --device host --nccl-id-file "$D/nccl.id" --batch 32 --mini-batch 4 --steps 3 > "$D/nccl.$r.out" 2>&1 &
    done
    wait
    "$CCSHIM_AUDIT" --otf2 "$D/on" "$D/nccl" > /dev/null 2>&1
    otf2-print "$D/on/traces.otf2" > "$D/nccl.txt" 2> /dev/null
    otf2-print -G "$D/on/traces.otf2" > "$D/nccldefs.txt" 2> /dev/null
    tap_eq "NCCL run: collective ends = collective records (24 per rank), comm_init and comm_free regions only" \
        "0 24|1 24 = 0 24|1 24, 4" \
        "$(coll_records "$D/nccl" | paste -sd '|' -) = $(otf2_events MPI_COLLECTIVE_END "$D/nccl.txt" | paste -sd '|' -), $(grep -c '^ENTER .*Region: "comm_\(init\|free\)"' "$D/nccl.txt")"
    tap_eq "NCCL run: its communicator, paradigm USER" "$(audit_comms "$D/nccl")|1" \
        "$(otf2_comms "$D/nccldefs.txt")|$(grep -c '^GROUP .*Type: COMM_GROUP, Paradigm: USER' "$D/nccldefs.txt")"
else
    tap_skip "NCCL run: collective ends = collective records" "ccshim-trainer-nccl or the test NCCL not built"
    tap_skip "NCCL run: its communicator, paradigm USER" "ccshim-trainer-nccl or the test NCCL not built"
fi

if ! ccs_have_mpi || [ ! -x "$CCSHIM_TRAINER" ]; then
    for t in "real run: exit 0" "real run: collective ends = collective records, per rank" \
        "real run: one communicator definition per communicator"; do
        tap_skip "$t" "MPI or the trainer not built"
    done
    tap_done
    exit $?
fi
ccs_mpirun 120 2 "$CCSHIM_RUN" --trace-dir "$D/run" --coalesce every:8 -- "$CCSHIM_TRAINER" --batch 32 \
    --mini-batch 4 --steps 3 > "$D/run.out" 2>&1 &&
    "$CCSHIM_AUDIT" --otf2 "$D/or" "$D/run" > /dev/null 2>&1 &&
    otf2-print "$D/or/traces.otf2" > "$D/run.txt" 2> /dev/null && otf2-print -G "$D/or/traces.otf2" > "$D/rundefs.txt"
tap_eq "real run: exit 0" 0 $?
# 3 steps x 8 mini-batches: 24 all-reduces per rank, 21 of them deferred
tap_eq "real run: collective ends = collective records, per rank" "0 24|1 24 = 0 24|1 24" \
    "$(coll_records "$D/run" | paste -sd '|' -) = $(otf2_events MPI_COLLECTIVE_END "$D/run.txt" | paste -sd '|' -)"
tap_eq "real run: one communicator definition per communicator (3: the world and each rank's own)" \
    "3 $(audit_comms "$D/run")" "$(otf2_comms "$D/rundefs.txt" | wc -l | tr -d ' ') $(otf2_comms "$D/rundefs.txt")"
tap_done
