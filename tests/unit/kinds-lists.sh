#!/bin/sh
# kinds-lists.sh - the lists written outside the code name every row of
# ccs_kinds.h's tables, so a new kind or verdict class cannot be left out of
# them: docs/trace-format.md's kinds (number and name, in the table's
# order), docs/desync.md's table of what must agree (every collective, and
# nothing else), tests/integration/symbols-mpi.txt (each collective's MPI_X,
# MPI_IX and their PMPI_ names exported) and docs/desync.md's table of
# verdicts (a row per class); and tests/integration/symbols-nccl.txt is the
# NCCL interposer's list of wrapped functions (src/nccl/nccl_fns.h).  The
# tables are read through the compiler (the X-macros expanded), not parsed.
. "$top_srcdir/tests/tap.sh"
cc=${CC:-cc}
command -v "$cc" >/dev/null || tap_skip_all "no C compiler ($cc)"
tap_plan 6
D=$CCS_TMP
cat > "$D/dump.c" <<'EOF'
#include "ccs_kinds.h"
#include <stdio.h>
int main(void)
{
#define CCS_X(e, n, s, c, ...) printf("K %d %s %d\n", n, s, c);
    CCS_KIND_LIST(CCS_X)
#undef CCS_X
#define CCS_X(e, n, s, ...) printf("V %d %s\n", n, s);
    CCS_VERDICT_LIST(CCS_X)
#undef CCS_X
    printf("COLL %d\n", CCS_CLASS_COLL);
    return 0;
}
EOF
if ! "$cc" -std=c11 -I"$top_srcdir/src/core" -o "$D/dump" "$D/dump.c" > "$D/cc.out" 2>&1; then
    tap_diag < "$D/cc.out"
    echo "Bail out! the tables do not build"; exit 1
fi
"$D/dump" > "$D/rows"
coll=$(awk '$1 == "COLL" {print $2}' "$D/rows")
awk '$1 == "K" {print $2, $3}' "$D/rows" > "$D/kinds"
awk -v c="$coll" '$1 == "K" && $4 == c {print $3}' "$D/rows" | sort > "$D/colls"

# docs/trace-format.md: "Kinds (`CCS_KIND_LIST`): 1 allreduce, 2 reduce, ..."
# up to the paragraph's end; the "(collectives, sequenced)" notes dropped.
awk '/^Kinds \(`CCS_KIND_LIST`\):/ {on = 1; sub(/^Kinds \(`CCS_KIND_LIST`\):/, "")} on && /^$/ {exit} on {print}' \
    "$top_srcdir/docs/trace-format.md" | tr '\n' ' ' | sed 's/([^)]*)//g; s/;/,/g; s/\.//g' | tr ',' '\n' |
    awk 'NF == 2 {print $1, $2}' > "$D/doc-kinds"
if cmp -s "$D/kinds" "$D/doc-kinds"; then
    tap_ok "docs/trace-format.md lists every kind, number and name, in the table's order"
else
    tap_not_ok "docs/trace-format.md lists every kind, number and name, in the table's order"
    diff "$D/kinds" "$D/doc-kinds" | tap_diag
fi

# docs/desync.md: the first column of the table "| collective | what must
# agree ...", each "name(_suffix)" standing for name and name_suffix.
awk '/^\| collective \| what must agree/ {on = 1; next} on && !/^\|/ {exit} on && !/^\| ---/ {print}' \
    "$top_srcdir/docs/desync.md" | cut -d'|' -f2 | tr ',' '\n' |
    sed -n 's/^ *\([a-z_]*\)\((\([a-z_]*\))\)\{0,1\} *$/\1 \1\3/p' | tr ' ' '\n' | sort -u > "$D/doc-colls"
if cmp -s "$D/colls" "$D/doc-colls"; then
    tap_ok "docs/desync.md says what must agree for every collective kind and no other"
else
    tap_not_ok "docs/desync.md says what must agree for every collective kind and no other"
    diff "$D/colls" "$D/doc-colls" | tap_diag
fi

# tests/integration/symbols-mpi.txt: MPI_Allreduce, MPI_Iallreduce, PMPI_...
sym="$top_srcdir/tests/integration/symbols-mpi.txt"
: > "$D/missing"
while read -r k; do
    cap=$(printf '%s' "$k" | awk '{print toupper(substr($0, 1, 1)) substr($0, 2)}')
    for s in "MPI_$cap" "MPI_I$k" "PMPI_$cap" "PMPI_I$k"; do
        grep -qx "$s" "$sym" || echo "$s" >> "$D/missing"
    done
done < "$D/colls"
tap_eq "tests/integration/symbols-mpi.txt exports every collective kind, blocking and nonblocking" "" \
    "$(tr '\n' ' ' < "$D/missing")"

# docs/desync.md's verdicts: a row "| `CLASS` ..." per class.
: > "$D/vmissing"
for v in $(awk '$1 == "V" {print $3}' "$D/rows"); do
    grep -q "^| \`$v\`" "$top_srcdir/docs/desync.md" || echo "$v" >> "$D/vmissing"
done
tap_eq "docs/desync.md describes every verdict class" "" "$(tr '\n' ' ' < "$D/vmissing")"
# tests/integration/symbols-nccl.txt: the NCCL interposer's two lists
# (src/nccl/nccl_fns.h) less the functions it only calls, nothing else.
cat > "$D/nccl.c" <<'EOF'
#include "nccl_fns.h"
#include <stdio.h>
int main(void)
{
#define CCS_G(name, ...) puts("nccl" #name);
    CCS_NCCL_GENERATED(CCS_G)
#undef CCS_G
#define CCS_A(name, where) if (sizeof #where != sizeof "called") puts("nccl" #name);
    CCS_NCCL_APART(CCS_A)
#undef CCS_A
    return 0;
}
EOF
if "$cc" -std=c11 -I"$top_srcdir/src/nccl" -o "$D/nccl" "$D/nccl.c" > "$D/nccl-cc.out" 2>&1; then
    "$D/nccl" | sort > "$D/nccl-fns"
    if test -s "$D/nccl-fns" && sort "$top_srcdir/tests/integration/symbols-nccl.txt" | cmp -s - "$D/nccl-fns"; then
        tap_ok "tests/integration/symbols-nccl.txt is src/nccl/nccl_fns.h's wrapped functions"
    else
        tap_not_ok "tests/integration/symbols-nccl.txt is src/nccl/nccl_fns.h's wrapped functions"
        sort "$top_srcdir/tests/integration/symbols-nccl.txt" | diff - "$D/nccl-fns" | tap_diag
    fi
else
    tap_not_ok "tests/integration/symbols-nccl.txt is src/nccl/nccl_fns.h's wrapped functions"
    tap_diag < "$D/nccl-cc.out"
fi
# (So that the comparisons above cannot pass on nothing read.)
tap_check "the tables read: kinds, collectives and verdict classes" \
    test -s "$D/kinds" -a -s "$D/colls" -a -n "$(awk '$1 == "V"' "$D/rows")"
tap_done
