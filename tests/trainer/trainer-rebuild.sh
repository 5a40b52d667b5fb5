#!/bin/sh
# tests/trainer/trainer-rebuild.sh - --rebuild-buckets, DDP's bucket rebuild
# after the first backward: the results are those of the run without it
# (--check, losses, gradient norms, final parameters), and the trace shows
# the rebuild: per step and buffer address (ccshim-audit --tsv-records), the
# old buffers reduced once in step 0 and never again, the new ones (new
# addresses) for the rest of step 0 and every later step.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/trainer/trainer-lib.sh"
tr_need_trainer
tap_plan 14
T=$CCS_TMP

# 2 ranks, 64 rows each, mini-batch 16, 2 columns: 8 backward passes per
# step; 2 buckets (16 reductions per step).
ARGS="--local-batch 64 --mini-batch 16 --columns 2 --buckets 2 --steps 3 --check"
# results FILE: the step lines' losses and norms, and the JSON's figures.
results() {
    grep '^step ' "$1" | awk '{ printf "%s %s %s;", $2, $6, $8 }'
    for k in checksum check_max_rel_err; do printf '%s=%s;' "$k" "$(tr_json "$1" "$k")"; done
}
tr_run 2 "$T/ref" $ARGS; r0=$?
# shellcheck disable=SC2086
tr_run 2 "$T/same" $ARGS --rebuild-buckets; r1=$?
# shellcheck disable=SC2086
tr_run 2 "$T/three" $ARGS --rebuild-buckets=3; r2=$?
tap_eq "the three runs exit 0 (--check ok)" "0 0 0" "$r0 $r1 $r2"
tap_eq "--rebuild-buckets: --check ok" 1 "$(grep -c '^check: max relative error .* ok$' "$T/same")"
tap_eq "--rebuild-buckets: losses, norms, checksum and check error those of the run without it" \
    "$(results "$T/ref")" "$(results "$T/same")"
tap_eq "--rebuild-buckets=3 (another layout): the same results" "$(results "$T/ref")" "$(results "$T/three")"
tap_eq "--rebuild-buckets=3: the trainer counts 2 + 7 x 3 = 23 reductions in step 0, 24 after" "23 24 24" \
    "$(grep '^step ' "$T/three" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $10 }')"
tap_eq "... and says so" "# buckets rebuilt after the first backward: 3 bucket(s) at new addresses" \
    "$(grep '^# buckets rebuilt' "$T/three")"
# shellcheck disable=SC2086
tr_run 2 "$T/ps" $ARGS --sync per-step; tr_run 2 "$T/ps-rb" $ARGS --sync per-step --rebuild-buckets=3
tap_eq "per-step sync: the rebuild changes nothing either" "$(results "$T/ps")" "$(results "$T/ps-rb")"

# Under the shim: calls per (step, buffer), buffers named b0, b1, ... in the
# order of their first reduction.
if [ -x "$CCSHIM_RUN" ] && [ -x "$CCSHIM_AUDIT" ] && [ -e "$top_builddir/.libs/libccshim-mpi.so" ]; then
    traced() {
        local out=$1; shift
        ccs_mpirun 90 2 "$CCSHIM_RUN" --trace-dir "$T/$out.tr" -- "$CCSHIM_TRAINER" "$@" >"$T/$out" 2>"$T/$out.err"
    }
    # per_buf RANK: "step bN count;" for the rank's all-reduces.
    per_buf() {
        "$CCSHIM_AUDIT" --tsv-records "$T/$1.tr" 2>/dev/null | awk -F'\t' -v r="$2" '
            !/^#/ && $1 == r && $4 == "allreduce" {
                if (!($13 in id)) id[$13] = "b" n++
                k = $10 " " id[$13]; if (!(k in c)) order[m++] = k; c[k]++ }
            END { for (i = 0; i < m; i++) printf "%s %d;", order[i], c[order[i]] }'
    }
    # shellcheck disable=SC2086
    traced t-ref $ARGS; traced t-same $ARGS --rebuild-buckets; traced t-three $ARGS --rebuild-buckets=3
    tap_eq "traced: without a rebuild, 2 buffers, 8 calls each per step" \
        "0 b0 8;0 b1 8;1 b0 8;1 b1 8;2 b0 8;2 b1 8;" "$(per_buf t-ref 0)"
    tap_eq "traced --rebuild-buckets: old buffers once in step 0, new addresses 7 times, then 8 per step" \
        "0 b0 1;0 b1 1;0 b2 7;0 b3 7;1 b2 8;1 b3 8;2 b2 8;2 b3 8;" "$(per_buf t-same 0)"
    tap_eq "traced --rebuild-buckets=3: 2 old buffers once, 3 new ones 7 times, then 8" \
        "0 b0 1;0 b1 1;0 b2 7;0 b3 7;0 b4 7;1 b2 8;1 b3 8;1 b4 8;2 b2 8;2 b3 8;2 b4 8;" "$(per_buf t-three 0)"
    tap_eq "... rank 1 the same" "$(per_buf t-three 0)" "$(per_buf t-three 1)"
    tap_eq "traced: the results under the shim are those without it" "$(results "$T/ref")" "$(results "$T/t-three")"
else
    for i in 1 2 3 4 5; do tap_skip "traced rebuild $i" "ccshim-run, ccshim-audit or libccshim-mpi.so not built"; done
fi

ccs_run_timeout 30 "$CCSHIM_TRAINER" --rebuild-buckets=0 >"$T/out" 2>"$T/err"; rc=$?
tap_check "--rebuild-buckets=0: status 2 naming the value" sh -c \
    "[ $rc = 2 ] && grep -q \"invalid --rebuild-buckets '0' (expected an integer >= 1)\" '$T/err'"
ccs_run_timeout 30 "$CCSHIM_TRAINER" --rebuild-buckets=4000 --steps 1 >"$T/out" 2>"$T/err"; rc=$?
tap_check "--rebuild-buckets=4000 with 3152 parameters: status 2 naming the value" sh -c \
    "[ $rc = 2 ] && grep -q 'rebuild-buckets 4000 exceeds the 3152 parameters (expected 1..3152)' '$T/err'"
tap_done
