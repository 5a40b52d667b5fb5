#!/bin/sh
# desync-trainer.sh - the source scenario: the reference trainer with one
# all-reduce per mini-batch, rank 1 skipping a mini-batch in step 3, on 4
# ranks.  ccshim must say rank 1 fell behind in step 3, name the call sites,
# and (abort) end the job instead of hanging.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/desync/lib.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
[ -x "$CCSHIM_TRAINER" ] || tap_skip_all "ccshim-trainer not built (tools/trainer)"
tap_plan 10

dsx_run trainer 60 4 CCSHIM_ON_DESYNC=abort -- "$CCSHIM_TRAINER" --sync=per-minibatch \
    --inject=skip-minibatch:1:3 --steps 5
lines=$(dsx_lines trainer DESYNC)
if [ "$DSX_RC" -ne 0 ] && [ "$DSX_RC" -ne 124 ]; then tap_ok "the job ends with an error (exit $DSX_RC)"
else tap_not_ok "the job ends with an error (exit $DSX_RC)"; dsx_diag trainer; fi
tap_check "DESYNC: rank 1 issued fewer collectives than the others in step 3" \
    sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=4 seq=[0-9]+: rank 1 issued seq [0-9]+ \(allreduce\(count=[0-9]+, float64, sum\)\) in step 4 where ranks 0,2-3 issued it in step 3: rank 1 issued fewer collectives than the others in step 3 and is behind from there on$"' _ "$lines"
# One host: one rank logs each verdict (its line and its full report).
tap_eq "one line per verdict in the combined output of the 4 ranks (one host)" \
    "$(cat "$CCS_TMP/trainer"/log-*.txt | grep '^ccshim [A-Z]' | sed 's/ \[seen by.*//; s/ for [0-9.]* s/ for N s/' | sort -u | wc -l | tr -d ' ')" \
    "$(cat "$CCS_TMP/trainer"/log-*.txt | grep -c '^ccshim [A-Z]')"
# Both sides' call sites: where the others wait or last called, and where rank 1 last called.
tap_check "the block names rank 1's call site" \
    grep -Eq "^ccshim desync\|   rank 1 \(comm rank 1, .*(last completed seq [0-9]+ step [0-9]+ at|blocked .* in) [^ ?]+" "$CCS_TMP/trainer/log-0.txt"
tap_check "the block names the others' call sites" \
    grep -Eq "^ccshim desync\|   rank 0 \(comm rank 0, .*(last completed seq [0-9]+ step [0-9]+ at|blocked .* in) [^ ?]+" "$CCS_TMP/trainer/log-0.txt"
# After the fact, ccshim-audit finds the same departure in the traces: rank 1
# differs from the verdict's sequence number on (same ops, other steps).
vseq=$(echo "$lines" | sed -n 's/.* seq=\([0-9]*\): rank 1 issued seq.*/\1/p' | head -1)
tap_check "ccshim-audit: rank 1 departs at the verdict's sequence number ($vseq)" sh -c \
    '[ -n "$3" ] && "$1" --json "$2" 2>/dev/null | grep -q "\"first_seq\":$3,\"ranks\":\[1\]"' _ \
    "$CCSHIM_AUDIT" "$CCS_TMP/trainer/trace" "$vseq"
# (The job may see a second verdict, the hang itself, before the abort lands.)
tap_eq "one block per verdict in the combined output of the 4 ranks" \
    "$(cat "$CCS_TMP/trainer"/log-*.txt | grep '^ccshim [A-Z]' | sed 's/ \[seen by.*//; s/ for [0-9.]* s/ for N s/' | sort -u | wc -l | tr -d ' ')" \
    "$(cat "$CCS_TMP/trainer"/log-*.txt | grep -c '^ccshim desync| comm ')"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag trainer

# Two ranks: no majority; both counts in the step and both call sites.
dsx_run trainer2 60 2 CCSHIM_ON_DESYNC=abort -- "$CCSHIM_TRAINER" --sync=per-minibatch \
    --inject=skip-minibatch:1:3 --steps 5
lines=$(dsx_lines trainer2 DESYNC)
if [ "$DSX_RC" -ne 0 ] && [ "$DSX_RC" -ne 124 ]; then tap_ok "2 ranks: the job ends with an error (exit $DSX_RC)"
else tap_not_ok "2 ranks: the job ends with an error (exit $DSX_RC)"; dsx_diag trainer2; fi
tap_check "2 ranks: in step 3 rank 0 issued 8, rank 1 issued 7, with both call sites" \
    sh -c 'echo "$1" | grep -Eq "^ccshim DESYNC comm=0x[0-9a-f]+ size=2 seq=32: ranks out of step: in step 3 rank 0 issued (at least )?8, rank 1 issued 7; from there on they issue the same operations in different steps \(rank 0 last at [^ ;]+; rank 1 last at [^ ;]+\)$"' _ "$lines"
tap_check "2 ranks: the block names both call sites with function and file:line" \
    sh -c '[ "$(grep -Ec "^ccshim desync\|   rank [01] \(comm rank [01], .* at tr_comm_allreduce_sum\+0x[0-9a-f]+( at [^ ]+:[0-9]+)? \(ccshim-trainer\+0x[0-9a-f]+\)" "$1"/log-*.txt | awk -F: "{s += \$NF} END {print s}")" -ge 2 ]' _ "$CCS_TMP/trainer2"
[ "$TAP_FAILED" -eq 0 ] || dsx_diag trainer2
tap_done
