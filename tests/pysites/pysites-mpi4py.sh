#!/bin/sh
# pysites-mpi4py.sh - `ccshim-run --python` names the Python line behind the
# MPI calls a Python program makes through mpi4py (docs/python-sites.md),
# where mpi4py's stripped module alone gives every call the site
# "MPI.cpython-...so+0x...": 2 ranks under mpirun, Debian's python3-mpi4py.
#   - each line's calls counted at that line, exactly, in the JSON and the
#     table; a Dup() of COMM_WORLD carries its lines too;
#   - a communicator that mpi4py makes of its own class (Split) keeps the
#     native site, as documented;
#   - the job's results are unchanged;
#   - without --python no record carries a Python line, and the audit's
#     table says how to name them.
. "$top_srcdir/tests/tap.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || tap_skip_all "no /usr/bin/python3"
"$PY" -c 'import mpi4py, numpy' 2>/dev/null ||
    tap_skip_all "mpi4py or numpy not installed for /usr/bin/python3 (apt-get install python3-mpi4py)"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ "$CCS_MPI_HYDRA" = 0 ] || tap_skip_all "Debian's python3-mpi4py is built against Open MPI, not this launcher's MPI"
tap_plan 8

job="$top_srcdir/tests/pysites/mpi4py_job.py"
line_of() { grep -n "# LINE:$1\$" "$job" | cut -d: -f1; }
PYTHONDONTWRITEBYTECODE=1 # nothing written into the source tree
export PYTHONDONTWRITEBYTECODE

# run NAME [OPTION...]: the job on 2 ranks, its trace in $CCS_TMP/NAME/trace; RC set.
run() {
    local name=$1 d="$CCS_TMP/$1"
    shift
    mkdir -p "$d/trace"
    ccs_mpirun 60 2 "$CCSHIM_RUN" --mpi --summary 0 --trace-dir "$d/trace" --set CCSHIM_JOB_ID="$name" "$@" -- \
        "$PY" "$job" >"$d/out" 2>"$d/err"
    RC=$?
    "$CCSHIM_AUDIT" --json "$d/trace" >"$d/a.json" 2>"$d/a.err"
    "$CCSHIM_AUDIT" "$d/trace" >"$d/a.txt" 2>&1
}
# sites NAME: "COUNT KIND LINE" per site over both ranks, the Python line
# number or "native", sorted.
sites() {
    "$PY" -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
for s in d["sites"]:
    m = re.match(r"mpi4py_job\.py:(\d+) in ", s.get("python") or "")
    print(s["count"], ",".join(s["kinds"]) or "-", m.group(1) if m else "native")' "$CCS_TMP/$1/a.json" | sort -k3,3 -k2,2
}

run py --python
tap_eq "--python: the job runs, its sum is the plain program's (4 all-reduces of 2 ranks: 1 x 2^5)" "0 sum 32" \
    "$RC $(grep '^sum' "$CCS_TMP/py/out")"
[ "$RC" = 0 ] || tap_diag < "$CCS_TMP/py/err"
S=$(sites py)
want_line() { printf '%s\n' "$S" | awk -v l="$2" -v k="$1" '$3 == l && $2 == k {print $1}'; }
tap_eq "each COMM_WORLD line's calls at that line: allreduce 6, barrier 6, bcast 4 (two calls inside mpi4py's bcast), dup 2" \
    "6 6 4 2" "$(want_line allreduce "$(line_of allreduce)") $(want_line barrier "$(line_of barrier)") $(printf '%s\n' "$S" | awk -v l="$(line_of bcast)" '$3 == l && $2 == "bcast" {n += $1} END {print n}') $(printf '%s\n' "$S" | awk -v l="$(line_of dup)" '$3 == l {n += $1} END {print n}')"
tap_eq "a Dup() of COMM_WORLD carries its line (2), a Split() of it keeps the native site (2, no line $(line_of split_allreduce))" \
    "2 2 0" "$(want_line allreduce "$(line_of dup_allreduce)") $(want_line allreduce native) $(printf '%s\n' "$S" | awk -v l="$(line_of split_allreduce)" '$3 == l' | wc -l | tr -d ' ')"
tap_check "the table's top call sites name the line, and no hint to use --python" sh -c \
    'grep -Eq "^ +6 .* mpi4py_job\.py:$2 in <module> \|" "$1" && ! grep -q "calls made through mpi4py" "$1"' _ \
    "$CCS_TMP/py/a.txt" "$(line_of allreduce)"
tap_eq "MPI.COMM_WORLD is a subclass of MPI.Intracomm, equal to the original (docs/python-sites.md)" \
    "world_is_base 0 world_equal 1" "$(grep -E '^world_(is_base|equal)' "$CCS_TMP/py/out" | tr '\n' ' ' | sed 's/ $//')"

run plain
tap_eq "without --python: the same sum, and no site carries a Python line" "0 sum 32 0" \
    "$RC $(grep '^sum' "$CCS_TMP/plain/out") $(sites plain | awk '$3 != "native"' | wc -l | tr -d ' ')"
tap_eq "... and type(MPI.COMM_WORLD) is mpi4py's own" "world_is_base 1" \
    "$(grep '^world_is_base' "$CCS_TMP/plain/out")"
# 14 calls a rank, all at mpi4py's module: 3 all-reduces, 3 barriers, 2
# broadcasts (bcast of an object), the Dup and its all-reduce, the Split and
# its all-reduce, 2 frees.
tap_check "... and the table says how to name the lines: 28 calls through mpi4py, ccshim-run --python" \
    grep -q "^    (28 calls made through mpi4py, all at its module's sites: \`ccshim-run --python\`\$" \
    "$CCS_TMP/plain/a.txt"
tap_done
