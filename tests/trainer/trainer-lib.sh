# tests/trainer/trainer-lib.sh - sourced by the trainer's shell tests after
# tests/tap.sh: runs the trainer and compares its outputs.

# BLAS threads would oversubscribe the 2-core CI machine with 4 ranks.
OPENBLAS_NUM_THREADS=1; export OPENBLAS_NUM_THREADS
OMP_NUM_THREADS=1; export OMP_NUM_THREADS

tr_need_trainer() {
    [ -x "$CCSHIM_TRAINER" ] || tap_skip_all "ccshim-trainer not built (needs MPI and CBLAS)"
    [ -n "${MPIRUN:-}" ] || tap_skip_all "no mpirun"
}

# tr_run NP OUTFILE ARGS...: the trainer on NP ranks (60 s limit); the
# status is the trainer's.
tr_run() {
    local np=$1 out=$2; shift 2
    ccs_mpirun 60 "$np" "$CCSHIM_TRAINER" "$@" >"$out" 2>"$out.err"
}

# tr_json FILE KEY: the number after "KEY": in the JSON summary line.
tr_json() {
    grep '^{' "$1" | sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p"
}

# tr_dump_err A B KIND [FACTOR]: max |FACTOR*a - b| / max |b| over the KIND
# lines (grad or param) of two --dump-grad files, printed as %.3e.
tr_dump_err() {
    awk -v kind="$3" -v f="${4:-1}" '
        FNR == NR { if ($1 == kind) a[$2] = $3; next }
        $1 == kind { n++; if (!($2 in a)) { bad = 1; next }
                     d = f * a[$2] - $3; if (d < 0) d = -d; if (d > num) num = d
                     v = $3 < 0 ? -$3 : $3; if (v > den) den = v }
        END { if (bad || n == 0 || den == 0) print "inf"; else printf "%.3e\n", num / den }' "$1" "$2"
}

# tr_below X LIMIT: X (a number or inf) < LIMIT.
tr_below() { awk -v x="$1" -v l="$2" 'BEGIN { exit !(x != "inf" && x + 0 < l + 0) }'; }
