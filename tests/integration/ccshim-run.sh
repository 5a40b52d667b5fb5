#!/bin/sh
# ccshim-run.sh - the launcher wrapper: help from the library's table, which
# library it preloads, option errors, and failing open.
. "$top_srcdir/tests/tap.sh"
tap_plan 10
"$CCSHIM_RUN" --help > "$CCS_TMP/help" 2>&1
tap_eq "--help exits 0" 0 $?
# Every variable of the table (parsed from src/core/config_table.h) is in --help
# with its option and default.
missing=$(sed -n 's/.*X([a-z_0-9]*, *"\(CCSHIM_[A-Z_0-9]*\)".*/\1/p' "$top_srcdir/src/core/config_table.h" | while read -r v; do
    opt=$(echo "$v" | sed 's/^CCSHIM_//' | tr 'A-Z_' 'a-z-')
    grep -q -- "--$opt  *$v  *default" "$CCS_TMP/help" || echo "$v"
done)
tap_eq "--help lists every CCSHIM_* variable with its option and default" "" "$missing"
# ... and docs/configuration.md documents each one with its default.
undocumented=$(sed -n 's/.*X([a-z_0-9]*, *"\(CCSHIM_[A-Z_0-9]*\)", *[A-Z]*, *"\([^"]*\)".*/\1 \2/p' "$top_srcdir/src/core/config_table.h" |
    while read -r v def; do
        grep -q "^| \`$v\` | " "$top_srcdir/docs/configuration.md" || { echo "$v"; continue; }
        [ -z "$def" ] || grep "^| \`$v\` | " "$top_srcdir/docs/configuration.md" | grep -q "\`$def\`" || echo "$v=$def"
    done)
tap_eq "docs/configuration.md documents every variable with its default" "" "$undocumented"

pe() { "$CCSHIM_RUN" --print-env "$@" | sed -n 's/^LD_PRELOAD=\([^:]*\).*/\1/p' | xargs -r basename; }
tap_eq "a program without MPI gets libccshim.so" "libccshim.so" "$(pe -- /bin/true)"
if [ -x "$top_builddir/tests/integration/mpi_pattern" ]; then
    tap_eq "a program linking MPI gets libccshim-mpi.so" "libccshim-mpi.so" \
        "$(pe -- "$top_builddir/tests/integration/mpi_pattern")"
else
    tap_skip "a program linking MPI gets libccshim-mpi.so" "built without MPI"
fi
tap_eq "--no-mpi forces the core library" "libccshim.so" "$(pe --no-mpi -- "$top_builddir/tests/integration/lifecycle")"
tap_eq "options set their variables" "CCSHIM_TRACE_DIR=/x CCSHIM_LOG_LEVEL=info" \
    "$("$CCSHIM_RUN" --print-env --trace-dir /x --log-level=info -- /bin/true | grep '^CCSHIM_' | sort -r | tr '\n' ' ' | sed 's/ $//')"

"$CCSHIM_RUN" --bogus -- /bin/true 2> "$CCS_TMP/e1"; r1=$?
"$CCSHIM_RUN" --set CCSHIM_NOPE=1 -- /bin/true 2> "$CCS_TMP/e2"; r2=$?
tap_check "unknown option or variable: exit 2 with the name" sh -c \
    "[ $r1 = 2 ] && [ $r2 = 2 ] && grep -q \"unknown option '--bogus'\" '$CCS_TMP/e1' && grep -q 'unknown variable CCSHIM_NOPE' '$CCS_TMP/e2'"

out=$("$CCSHIM_RUN" --libdir /nonexistent -- /bin/echo still runs 2> "$CCS_TMP/e3")
tap_check "missing library: the job runs anyway, with a warning" sh -c \
    "[ '$out' = 'still runs' ] && grep -q 'running /bin/echo without ccshim' '$CCS_TMP/e3'"
"$CCSHIM_RUN" -- /nonexistent/prog 2> "$CCS_TMP/e4"; r4=$?
tap_check "missing program: exit 127 naming it" sh -c "[ $r4 = 127 ] && grep -q '/nonexistent/prog' '$CCS_TMP/e4'"
tap_done
