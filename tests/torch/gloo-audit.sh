#!/bin/sh
# gloo-audit.sh - torch.distributed's calls on gloo (which ccshim does not
# intercept) counted by ccshim-audit under their own backend: a real 2-rank
# job (tests/torch/gloo_calls_job.py --shape count, Debian's torch 1.13)
# makes per step two all_reduces, an all_gather_object (two gloo all_gathers
# inside: one call as the job wrote it), a broadcast and an all_reduce with
# async_op=True, three marked steps, then a barrier.  The torch helper
# records each call it saw (ccshim_foreign_call, _issued; trace format 3):
# --json, --tsv, the table and the Chrome trace count exactly those, per
# step and rank, on a communicator of backend torch.distributed.  Before,
# the traces held none of them.
. "$top_srcdir/tests/torch/lib.sh"
torch_require
tap_plan 6
TR=$CCS_TMP/tr
ccs_mpirun 60 2 "$CCSHIM_RUN" --mpi --torch --trace-dir "$TR" -- "$TORCH_PY" \
    "$top_srcdir/tests/torch/gloo_calls_job.py" --shape count > "$CCS_TMP/job.out" 2> "$CCS_TMP/job.err"
tap_eq "the job runs" "0 done" "$? $(cat "$CCS_TMP/job.out")"

"$CCSHIM_AUDIT" --json "$TR" > "$CCS_TMP/a.json" 2> "$CCS_TMP/audit.err"
# step rank kind:count ... of the torch.distributed communicators, from --json
"$TORCH_PY" - "$CCS_TMP/a.json" > "$CCS_TMP/counts" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["steps"]:
    for r in s["ranks"]:
        for c in r["comms"]:
            if c["backend"] == "torch.distributed":
                print(s["step"], r["rank"], " ".join("%s:%d" % (k["kind"], k["count"]) for k in c["calls"]))
PY
want=""
for s in 0 1 2; do for r in 0 1; do want="$want$s $r allreduce:3 bcast:1 allgather:1;"; done; done
tap_eq "--json: per step and rank, 3 all_reduces (one async), 1 broadcast, 1 all_gather_object; the barrier in step 3" \
    "${want}3 0 barrier:1;3 1 barrier:1;" "$(tr '\n' ';' < "$CCS_TMP/counts")"
tap_eq "... on one communicator, described as torch.distributed with 2 ranks" "1 torch.distributed 2" \
    "$("$TORCH_PY" -c 'import json, sys
c = [c for c in json.load(open(sys.argv[1]))["comms"] if c["backend"] == "torch.distributed"]
print(len(c), c[0]["backend"], c[0]["size"])' "$CCS_TMP/a.json")"
tap_eq "--tsv: the same 32 calls in the rows of backend torch.distributed" 32 \
    "$("$CCSHIM_AUDIT" --tsv "$TR" 2> /dev/null | awk -F'\t' '$9 == "torch.distributed" { n += $5 } END { print n + 0 }')"
tap_eq "the table names the communicator's backend" 3 \
    "$("$CCSHIM_AUDIT" "$TR" 2> /dev/null | grep -c '^  comm [0-9a-f]* (torch.distributed, 2 ranks)$')"
"$CCSHIM_AUDIT" --chrome-trace "$CCS_TMP/c.json" "$TR" > /dev/null 2>&1
tap_eq "--chrome-trace: 32 slices of category torch.distributed, each with its Python line; 6 of all_gather_object" "32 32 6" \
    "$("$TORCH_PY" -c 'import json, sys
e = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "torch.distributed"]
print(len(e), sum(1 for x in e if "gloo_calls_job.py:" in x["args"]["site"]),
      sum(1 for x in e if x["args"].get("torch_call") == "all_gather_object"))' "$CCS_TMP/c.json")"
