#!/bin/sh
# NCCL interception end to end, without a GPU: nccl_pattern (a known pattern
# of NCCL calls, see its header) runs as NP plain processes on the host-memory
# fake libnccl.so.2, once alone and once with libccshim.so preloaded.  The
# results must be identical, and the traces must hold exactly the calls made:
# every kind, datatype, op, count, root, flag, group depth and byte count per
# rank and step; the same sequence numbers and fingerprints on every member
# of every communicator; the communicators with the right parents.
. "$top_srcdir/tests/tap.sh"

PAT=$top_builddir/tests/nccl/nccl_pattern
DUMP=$top_builddir/tests/ccs_trace_dump
SHIM=$top_builddir/.libs/libccshim.so
[ -x "$PAT" ] || tap_skip_all "nccl.h was not found at configure time (nccl_pattern not built)"
[ -f "$SHIM" ] || tap_skip_all "libccshim.so is not built"
[ -x "$DUMP" ] || tap_skip_all "ccs_trace_dump is not built"

STEPS=3
SIZES="2 3 4"
tap_plan $((13 * 3 + 2))
export FAKENCCL_TIMEOUT=30

# tap_same NAME EXPECTED ACTUAL: like tap_eq for multi-line values, with a diff.
tap_same() {
    printf '%s\n' "$2" >"$CCS_TMP/expected"
    printf '%s\n' "$3" >"$CCS_TMP/actual"
    if cmp -s "$CCS_TMP/expected" "$CCS_TMP/actual"; then tap_ok "$1"; else
        tap_not_ok "$1"; diff "$CCS_TMP/expected" "$CCS_TMP/actual" | tap_diag; fi
}

# launch NP DIR PRELOAD: runs NP ranks (RANK/WORLD_SIZE as torchrun sets
# them) under one 90 s limit; DIR/rc.R holds each rank's exit status.
launch() {
    ccs_run_timeout 90 sh -c '
        np=$1 dir=$2 pre=$3 pat=$4 steps=$5 r=0
        while [ "$r" -lt "$np" ]; do
            (RANK=$r WORLD_SIZE=$np LD_PRELOAD=$pre "$pat" "$dir/id" "$steps" >"$dir/out.$r" 2>"$dir/err.$r"
             echo $? >"$dir/rc.$r") &
            r=$((r + 1))
        done
        wait' sh "$1" "$2" "$3" "$PAT" "$STEPS"
}

# all_ok NP DIR: every rank exited 0 (else shows their stderr).
all_ok() {
    r=0
    while [ "$r" -lt "$1" ]; do
        if [ "$(cat "$2/rc.$r" 2>/dev/null)" != 0 ]; then
            echo "# rank $r exit status $(cat "$2/rc.$r" 2>/dev/null)"; tap_diag <"$2/err.$r"; return 1
        fi
        r=$((r + 1))
    done
}

# Expected non-management records of one rank on the world communicator:
# "rank step kind dtype op count root flags depth bytes".
expect_world() {
    awk -v n="$1" -v steps="$STEPS" 'BEGIN {
        for (r = 0; r < n; r++) for (s = 0; s < steps; s++) {
            p = r " " s " "
            print p "allreduce float32 sum 96 -1 - 0 384"
            print p "allreduce float64 sum 96 -1 in_place 0 768"
            print p "allreduce int32 max 96 -1 - 0 384"
            print p "allreduce int64 min 96 -1 - 0 768"
            print p "allreduce float32 prod 96 -1 - 0 384"
            print p "allreduce float64 avg 96 -1 - 0 768"
            print p "bcast int32 none 96 " s % n " - 0 384"
            print p "bcast int64 none 96 " (s + 1) % n " in_place 0 768"
            print p "reduce int64 sum 96 " n - 1 " - 0 768"
            print p "allgather float32 none 24 -1 - 0 96"
            print p "allgather float32 none 24 -1 in_place 0 96"
            print p "reduce_scatter float64 sum 24 -1 - 0 " 24 * 8 * n
            print p "alltoall int32 none 24 -1 - 0 " 24 * 4 * n
            print p "gather uint8 none 24 " s % n " - 0 24"
            print p "scatter int64 none 24 " (s + 1) % n " - 0 " (r == (s + 1) % n ? 24 * 8 * n : 0)
            print p "allreduce float64 premulsum 96 -1 - 0 768"
            print p "send float32 none 24 " (r + 1) % n " in_group 1 96"
            print p "recv float32 none 24 " (r + n - 1) % n " in_group 1 96"
            print p "allreduce int32 sum 24 -1 in_group 2 96"
        } }' | sort
}

# Expected records counted per "rank role step kind" for everything else:
# communicator management, the split communicators, the step markers.
expect_other() {
    awk -v n="$1" -v steps="$STEPS" 'BEGIN {
        for (r = 0; r < n; r++) {
            print r " world 0 comm_init 1"
            print r " world 0 comm_split 2"
            print r " world " steps " comm_finalize 1"
            print r " world " steps " comm_free 1"
            for (s = 0; s < steps; s++) print r " split " s " allreduce 1"
            print r " split " steps " comm_finalize 1"
            print r " split " steps " comm_free 1"
            for (s = 1; s <= steps; s++) print r " none " s " step 1"
            if (r == 0) {
                print r " initall " steps " comm_init " n + 1
                print r " initall " steps " comm_free " n + 1
            } else {
                print r " split7 0 allreduce 1"
                print r " split7 " steps " comm_finalize 1"
                print r " split7 " steps " comm_free 1"
            }
        } }' | sort
}

# Role of every (trace rank, communicator) from the COMM definitions, then
# the records tagged with it: the two-file awk idiom over one dump.
ROLES='FNR == NR {
        if ($1 == "C") {
            role = "?"
            if ($7 == "comm_init" && $4 == "0000000000000000") role = ($6 == n ? "world" : ($6 == n + 1 ? "initall" : "?"))
            if ($7 == "comm_split") role = ($8 == 7 ? "split7" : "split")
            roles[$2 SUBSEP $3] = role
        }
        next }
    $1 != "R" { next }
    { role = ($3 == "0000000000000000") ? "none" : roles[$2 SUBSEP $3]; if (role == "") role = "undefined" }'

for NP in $SIZES; do
    D=$CCS_TMP/np$NP
    mkdir -p "$D/plain" "$D/shim" "$D/traces"

    launch "$NP" "$D/plain" ""
    tap_check "np=$NP: every rank of the pattern passes without the shim" all_ok "$NP" "$D/plain"

    CCSHIM_TRACE_DIR=$D/traces launch "$NP" "$D/shim" "$SHIM"
    tap_check "np=$NP: every rank of the pattern passes with the shim preloaded" all_ok "$NP" "$D/shim"

    tap_eq "np=$NP: every result identical with and without the shim" \
        "$(cat "$D"/plain/out.* | sort | cksum)" "$(cat "$D"/shim/out.* | sort | cksum)"

    set -- "$D"/traces/*.cctrace
    tap_eq "np=$NP: one trace per rank" "$NP" "$#"
    tap_check "np=$NP: every trace reads back whole" sh -c '"$0" "$@" >"'"$D"'/dump.tsv"' "$DUMP" "$@"

    tap_same "np=$NP: world-communicator records (kind dtype op count root flags depth bytes) per rank and step" \
        "$(expect_world "$NP")" \
        "$(awk -v n="$NP" "$ROLES"'
              role == "world" && $5 !~ /^comm_/ { print $2, $6, $5, $11, $12, $10, $9, $7, $8, $15 }' \
              "$D/dump.tsv" "$D/dump.tsv" | sort)"

    tap_same "np=$NP: management, split and step records counted per rank, communicator and step" \
        "$(expect_other "$NP")" \
        "$(awk -v n="$NP" "$ROLES"'
              !(role == "world" && $5 !~ /^comm_/) { c[$2 " " role " " $6 " " $5]++ }
              END { for (k in c) print k, c[k] }' "$D/dump.tsv" "$D/dump.tsv" | sort)"

    # Collective sequence numbers: 1..K with no gap on every (rank, comm).
    tap_same "np=$NP: sequence numbers run 1..K without gaps on every rank and communicator" "" \
        "$(awk '$1 == "R" && $4 > 0 && $5 != "send" && $5 != "recv" { k = $2 " " $3; n[k]++; if ($4 > m[k]) m[k] = $4 }
                END { for (k in n) if (n[k] != m[k]) print k, n[k], m[k] }' "$D/dump.tsv")"

    # Same (kind, fingerprint) for each (comm, seq) on every member, and
    # every member has it (members = ranks that defined the communicator).
    tap_same "np=$NP: every (communicator, seq) has one kind and fingerprint, on every member" "" \
        "$(awk '$1 == "C" { members[$3]++ }
                $1 == "R" && $4 > 0 && $5 != "send" && $5 != "recv" {
                    k = $3 " " $4; v = $5 " " $13
                    if (k in fp && fp[k] != v) print "differs:", k, fp[k], "vs", v
                    fp[k] = v; have[k]++ }
                END { for (k in have) { split(k, a, " "); if (have[k] != members[a[1]]) print "missing:", k, have[k], members[a[1]] } }' \
                "$D/dump.tsv")"

    tap_same "np=$NP: the world communicator has one identity, ranks 0..NP-1 of NP" \
        "$(seq 0 $((NP - 1)) | sed "s/\$/ $NP/")" \
        "$(awk -v n="$NP" '$1 == "C" && $7 == "comm_init" && $6 == n { print $5, $6; ids[$3] = 1 }
                END { c = 0; for (i in ids) c++; if (c != 1) print "identities:", c }' "$D/dump.tsv" | sort -n)"

    # Split children: parent = the world identity; one identity per color.
    tap_same "np=$NP: split communicators derive from the world one, one identity per color" \
        "$(awk -v n="$NP" 'BEGIN { print "color 0 members " int((n + 1) / 2) " ids 1"; print "color 1 members " int(n / 2) " ids 1"; print "color 7 members " n - 1 " ids 1" }')" \
        "$(awk -v n="$NP" '$1 == "C" && $7 == "comm_init" && $6 == n { world = $3 }
                $1 == "C" && $7 == "comm_split" { if ($4 != world && world != "") print "bad parent"; par[$8] = $4; m[$8]++; if (!(($8, $3) in seen)) { seen[$8, $3] = 1; ids[$8]++ } }
                END { for (c in m) print "color", c, "members", m[c], "ids", ids[c] }' "$D/dump.tsv" | sort)"

    tap_same "np=$NP: no record failed" "" "$(awk '$1 == "R" && $7 ~ /error/' "$D/dump.tsv")"
    tap_same "np=$NP: the shim said nothing on stderr but its summary" "" \
        "$(cat "$D"/shim/err.* | grep -v ': summary: ' || true)"
done

# Switched off, the shim forwards every call unchanged and writes nothing.
D=$CCS_TMP/disabled
mkdir -p "$D/traces"
CCSHIM_DISABLE=1 CCSHIM_TRACE_DIR=$D/traces launch 3 "$D" "$SHIM"
tap_check "CCSHIM_DISABLE=1: every rank passes" all_ok 3 "$D"
tap_eq "CCSHIM_DISABLE=1: results identical to the run without the shim, no trace" \
    "$(cat "$CCS_TMP"/np3/plain/out.* | sort | cksum) 0" \
    "$(cat "$D"/out.* | sort | cksum) $(ls "$D/traces" | wc -l)"
tap_done
