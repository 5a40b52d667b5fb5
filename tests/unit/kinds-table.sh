#!/bin/sh
# kinds-table.sh - the kinds table (CCS_KIND_LIST in src/core/ccs_kinds.h)
# refuses, at build time, a row that leaves out a fact or whose facts
# contradict each other: each bad row below fails to compile with the
# assertion that names it, and the real table compiles.
. "$top_srcdir/tests/tap.sh"
cc=${CC:-cc}
command -v "$cc" >/dev/null || tap_skip_all "no C compiler ($cc)"
tap_plan 12
# try NAME ROW EXPECTED: compiling ROW after the header fails, saying EXPECTED.
try() {
    printf '#include "ccs_kinds.h"\nCCS_KIND_FACTS_AGREE(%s)\n' "$2" > "$CCS_TMP/row.c"
    if "$cc" -std=c11 -fsyntax-only -I"$top_srcdir/src/core" "$CCS_TMP/row.c" > "$CCS_TMP/out" 2>&1; then
        tap_not_ok "$1: builds"
    elif grep -q -- "$3" "$CCS_TMP/out"; then
        tap_ok "$1"
    else
        tap_not_ok "$1: fails, but not with \"$3\""; tap_diag < "$CCS_TMP/out"
    fi
}
printf '#include "ccs_kinds.h"\nint main(void) { return ccs_kind_counter(CCS_KIND_ALLREDUCE) != CCS_COUNTER_SEQ; }\n' > "$CCS_TMP/ok.c"
tap_check "the table as it is builds" "$cc" -std=c11 -Werror -Wall -Wextra -fsyntax-only -I"$top_srcdir/src/core" "$CCS_TMP/ok.c"
try "a collective without its fingerprint fields" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, SEQ' 'requires 12 arguments'
try "a collective off the collective sequence" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, NONE, 1, 0, 1, 0, 0, NEWCOLL, SAME' 'a collective is on the collective sequence'
try "a point-to-point kind with fingerprint fields" \
    'NEWP2P, 35, "newp2p", CCS_CLASS_P2P, P2P, 0, 1, 0, 0, 0, NONE, SAME' 'only a collective has fingerprint fields'
try "the whole signature and its size" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, SEQ, 1, 1, 0, 0, 0, NEWCOLL, SAME' 'the whole signature or its size, not both'
try "an op without the whole signature" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, SEQ, 0, 1, 1, 0, 0, NEWCOLL, SAME' 'enters with its op'
try "basic types beside the whole signature" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, SEQ, 1, 0, 1, 0, 1, NEWCOLL, SAME' 'beside the size only'
try "a communicator call on the point-to-point counter" \
    'COMM_NEW, 56, "comm_new", CCS_CLASS_COMM, P2P, 0, 0, 0, 0, 0, NONE, SAME' 'and they alone'
try "a collective without its OTF2 type" \
    'NEWCOLL, 18, "newcoll", CCS_CLASS_COLL, SEQ, 0, 0, 0, 0, 0, NONE, SAME' 'only a collective, names its OTF2'
try "a communicator call with an OTF2 collective type" \
    'COMM_NEW, 56, "comm_new", CCS_CLASS_COMM, SEQ, 0, 0, 0, 0, 0, BARRIER, SAME' 'only a collective, names its OTF2'
try "a point-to-point kind in place in its own block" \
    'NEWP2P, 35, "newp2p", CCS_CLASS_P2P, P2P, 0, 0, 0, 0, 0, NONE, OWN_IN_RECV' 'only a collective has blocks'
try "a number past CCS_KIND_MAX" \
    'NEWCOLL, 65, "newcoll", CCS_CLASS_COLL, SEQ, 0, 0, 0, 0, 0, NEWCOLL, SAME' 'number out of range'
