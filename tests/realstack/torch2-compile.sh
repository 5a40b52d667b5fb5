#!/bin/sh
# torch2-compile.sh - coalescing a DDP model under torch.compile (torch 2.13,
# backend aot_eager), tests/torch/ddp_job.py's cached loss with its buckets
# reduced through MPI, under `ccshim-run --torch --coalesce auto`: both
# torch.compile(DDP(model)) (which died in Dynamo, "Guard failed on the same
# frame it was created ... len(G['weakref'].finalize._registry)", while the
# helper's forward wrapper was traced) and DDP(torch.compile(model)).  Each
# against the job's own no_sync() fix, compiled the same way, without
# ccshim: one real reduction per bucket per step from step 0, the
# parameters of the fix to the bit, ranks equal, no frame of ccshim's
# compiled or recompiled, the model's code recompiled exactly as without
# ccshim and no more recompilations in all (4 steps: a recompilation per
# step would add 3 per rank).  Last, a DDP subclass with a forward of its
# own is left to ccshim's all-reduce-level coalescing (the helper patches
# DDP instances, not the class).
. "$top_srcdir/tests/realstack/lib.sh"
rs_require
tap_plan 9
J="--batch 16 --minibatch 4 --steps 4 --compile-backend aot_eager"
for how in outer inner; do
    ddp "$how-fix" 2 -- $J --compile "$how" --mode no_sync
    ddp "$how" 2 --coalesce auto -- $J --compile "$how"
    tap_eq "--compile $how: runs; DDP synchronises once per step from step 0 on both ranks (8 backward passes announced)" \
        "0 2" "$? $(grep -c 'DDP synchronises once per step from the first step (at the 8-th backward)' "$CCS_TMP/$how.err")"
    tap_eq "... one real reduction of the bucket per step, none answered locally; parameters: the no_sync() fix's to the bit, ranks equal" \
        "$(expect_steps 0 3 2 1 0 | tr '\n' ';') $(val "$how-fix" digest) 1" \
        "$(per_step "$how" | tr '\n' ';') $(val "$how" digest) $(val "$how" ranks_equal)"
    # Dynamo's counts over both ranks: recompiles of ccshim's frames (none
    # with the fix), of the model's (as without ccshim), graphs (as
    # without) and recompiles in all (no more than without: the helper's
    # skipped wrapper saves the frame DDP's forward is inlined into without
    # it, outer 8 against 10)
    fr=$(val "$how-fix" recompiles)
    r=$(val "$how" recompiles)
    tap_eq "... Dynamo: no frame of ccshim's recompiled, the model's recompiled and the graphs as without ccshim, recompiles in all no more ($fr)" \
        "0 $(val "$how-fix" recompiles_model) $(val "$how-fix" graphs) no more than $fr" \
        "$(val "$how" recompiles_ccshim) $(val "$how" recompiles_model) $(val "$how" graphs) $([ "$r" -le "$fr" ] && echo "no more than $fr" || echo "$r, more than $fr")"
done
tap_check "... the compiled model's forward never went through Dynamo's guard failure" \
    sh -c "! grep -q 'Guard failed on the same frame' '$CCS_TMP/outer.err' '$CCS_TMP/inner.err'"

# A DDP subclass with a forward of its own: the helper leaves it alone
# (ccshim's own coalescing learns the pattern: 1 real, 7 answered locally
# from step 3), parameters equal across ranks, within 1e-5 of the run
# without ccshim.
ddp subref 2 -- $J --steps 5 --subclass --save "$CCS_TMP/subref.npy"
ddp sub 2 --coalesce auto -- $J --steps 5 --subclass --ref "$CCS_TMP/subref.npy"
tap_eq "a DDP subclass with its own forward: runs, the helper stays out, ccshim coalesces from step 3; parameters" \
    "0 0 $(expect_steps 3 4 2 1 7 | tr '\n' ';') ranks_equal 1, within 1e-5" \
    "$? $(grep -c 'DDP synchronises once per step' "$CCS_TMP/sub.err") $(per_step sub 3 | tr '\n' ';') $(close sub)"
# DDP's class is left alone (its forward is torch's in every run); the
# helper gave each plain DDP model a forward of its own, not the subclass.
tap_eq "DDP's class forward is torch's own; the plain DDP models have their own (the helper's), the subclass does not" \
    "torch own torch own torch class" \
    "$(for n in outer inner sub; do echo "$(val $n ddp_class_forward) $(val $n ddp_instance_forward)"; done | tr '\n' ' ' | sed 's/ $//')"
tap_done
