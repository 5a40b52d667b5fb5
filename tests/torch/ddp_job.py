"""A real torch.nn.parallel.DistributedDataParallel job on CPU whose bucket
reductions go through MPI (tests/torch/, bench/torch-bench.sh).

Launched by mpirun, one process per rank, with /usr/bin/python3 (Debian's
python3-torch and python3-mpi4py).  gloo only sets the process group up
(MASTER_ADDR/MASTER_PORT; RANK/WORLD_SIZE from OMPI_COMM_WORLD_*); DDP's
buckets are all-reduced by a comm hook through mpi4py (SUM, then divided by
the world size), in place, so ccshim sees every bucket reduction.

The loss is a GradCache-style cached loss with two columns (queries and
documents through one encoder): embed the whole batch without grad, compute
an in-batch contrastive loss on the cached embeddings and its gradient with
respect to them, then re-embed every mini-batch of each column with grad and
backward the cached gradient: 2 * batch / minibatch backward passes, each
reducing every bucket, per optimizer step (--mode per-minibatch), or only the
last one (--mode no_sync).

At the end rank 0 gathers every rank's parameters: prints "ranks_equal 1"
when they are bitwise equal, "digest SHA256", "dist_all_reduces N" (rank
0's torch.distributed.all_reduce calls from Python: the job makes none, so
these are ccshim_torch's gradient averagings), and with --ref FILE the largest
absolute difference to the parameters saved there ("maxdiff X"); --save FILE
writes them.  Rank r may skip one mini-batch (--skip-rank r --skip-step s) or
replay one more (--extra-rank r --extra-step s).  --probe-forwards N runs N
more forwards without grad before each step's embedding (what ccshim's torch
helper counts to announce a step's backward passes: it then announces N too
many).
"""
import argparse
import hashlib
import os
import sys
import time


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--minibatch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--last-batch", type=int, default=0,
                    help="samples of the last step (a short last batch, drop_last=False); 0: --batch")
    ap.add_argument("--mode", choices=("per-minibatch", "no_sync"), default="per-minibatch")
    ap.add_argument("--first", type=int, default=0, metavar="K",
                    help="--mode from step K only; before it, --first-way (bench/ddp-heap-bench.sh)")
    ap.add_argument("--first-way", choices=("per-minibatch", "local", "first-synced", "late-synced"),
                    default="per-minibatch",
                    help="steps before --first: every backward synchronised (what ccshim's helper "
                         "learns from); none (local), or only each step's first (first-synced), the "
                         "gradients then averaged once before the optimizer step; or step 0 as "
                         "under no_sync and every backward of steps 1 to K-1 (late-synced)")
    ap.add_argument("--dim", type=int, default=16, help="input width")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--emb", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2, help="hidden layers")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--first-bucket-bytes", type=int, default=0,
                    help="dist._DEFAULT_FIRST_BUCKET_BYTES (DDP's first bucket; 0: torch's 1 MiB)")
    ap.add_argument("--grad-as-bucket-view", action="store_true")
    ap.add_argument("--static-graph", action="store_true")
    ap.add_argument("--find-unused", action="store_true",
                    help="find_unused_parameters=True and one head per column (each backward leaves "
                         "the other head unused); also an integer bitmap all-reduced through MPI after "
                         "every backward, as DDP does on NCCL, which must never be deferred")
    ap.add_argument("--opt", choices=("sgd", "adamw", "by-hand"), default="sgd",
                    help="by-hand: plain SGD written in the job, no torch.optim optimizer")
    ap.add_argument("--two-opt", action="store_true", help="encoder and head in two optimizers")
    ap.add_argument("--sched", action="store_true", help="an lr scheduler (StepLR) on every optimizer")
    ap.add_argument("--closure", action="store_true", help="the backward passes run in step(closure)")
    ap.add_argument("--deepcopy", action="store_true", help="step a copy.deepcopy of the optimizer")
    ap.add_argument("--scaler", action="store_true", help="step through a GradScaler: torch >= 2.3's "
                    "torch.amp.GradScaler('cpu'), enabled (init_scale 1024: the surrogates' backward is "
                    "scaled, unscale_ divides exactly); before, torch.cuda.amp.GradScaler, disabled on CPU "
                    "(it calls optimizer.step)")
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_ before the step")
    ap.add_argument("--skip-rank", type=int, default=-1)
    ap.add_argument("--skip-step", type=int, default=-1)
    ap.add_argument("--extra-rank", type=int, default=-1,
                    help="this rank replays one more mini-batch (-2: every rank)")
    ap.add_argument("--accum", type=int, default=1,
                    help="gradient accumulation: this many cached-loss passes per optimizer step, all but "
                         "the last under the job's own ddp.no_sync() (as accelerate does)")
    ap.add_argument("--extra-step", type=int, default=-1)
    ap.add_argument("--gloo-buckets", action="store_true",
                    help="no comm hook: DDP reduces its buckets through gloo, which ccshim does not see")
    ap.add_argument("--probe-forwards", type=int, default=0, metavar="N",
                    help="N more no-grad forwards of the model before each step's cached embedding "
                         "(a probe, as an evaluation between steps would make)")
    ap.add_argument("--compile", choices=("none", "outer", "inner"), default="none",
                    help="torch.compile (torch >= 2.0, backend --compile-backend): outer compiles the DDP "
                         "model, torch.compile(DDP(model)); inner is DDP(torch.compile(model)); rank 0 "
                         "prints Dynamo's counts over every rank (recompiles, of the model's code and of "
                         "ccshim's, compiled_frames, graphs, graph_breaks)")
    ap.add_argument("--compile-backend", default="aot_eager")
    ap.add_argument("--subclass", action="store_true",
                    help="the DDP model is a DistributedDataParallel subclass with a forward of its own "
                         "(which calls DDP's)")
    ap.add_argument("--refusal-rendezvous", action="store_true",
                    help="a rank whose optimizer step ccshim refuses prints the error, then waits in a "
                         "barrier for the others before it exits 1 (the launcher ends the job when the first "
                         "rank exits non-zero, possibly before a slower rank reached its own refusal)")
    ap.add_argument("--pg-timeout", type=float, default=0, help="process group timeout in s (0: torch's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", default="")
    ap.add_argument("--ref", default="")
    ap.add_argument("--time", action="store_true",
                    help="print the median step time of steps 3.. (step_ms) and rank 0's median minor "
                         "page faults per step (faults_per_step)")
    return ap.parse_args()


def main():
    a = parse()
    if a.first and a.first_way in ("local", "first-synced") and a.closure:
        sys.exit("ddp_job.py: --first-way %s averages the gradients before the optimizer step "
                 "and cannot with --closure (the backward runs inside it)" % a.first_way)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from mpi4py import MPI
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    import gloo_group
    comm, rank, world = gloo_group.init(a.pg_timeout)

    torch.manual_seed(a.seed)
    # torch.distributed.all_reduce calls from Python (the job makes none:
    # these are ccshim_torch's gradient averagings, through gloo)
    dist_all_reduces = [0]
    real_all_reduce = dist.all_reduce

    def counting_all_reduce(*args, **kw):
        dist_all_reduces[0] += 1
        return real_all_reduce(*args, **kw)

    dist.all_reduce = counting_all_reduce

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layers, w = [], a.dim
            for _ in range(a.layers):
                layers += [nn.Linear(w, a.hidden), nn.Tanh()]
                w = a.hidden
            self.body = nn.Sequential(*layers)
            heads = 2 if a.find_unused else 1
            self.heads = nn.ModuleList(nn.Linear(w, a.emb) for _ in range(heads))

        def forward(self, x, column=0):
            return self.heads[column % len(self.heads)](self.body(x))

    model = Encoder()
    if a.first_bucket_bytes:
        dist._DEFAULT_FIRST_BUCKET_BYTES = a.first_bucket_bytes
    recompiles = [0, 0, 0]  # all, of this file's code (the model), of ccshim's helper
    if a.compile != "none":
        # Dynamo's recompilations, one log record each (TORCH_LOGS=recompiles):
        # "Recompiling function forward in /path/ddp_job.py:168 ..."
        import logging

        class Recompiles(logging.Handler):
            def emit(self, record):
                what = record.getMessage().split("\n")[0]
                recompiles[0] += 1
                recompiles[1] += os.path.basename(__file__) + ":" in what
                recompiles[2] += "/ccshim_" in what

        torch._logging.set_logs(recompiles=True)
        logging.getLogger("torch._dynamo.guards.__recompiles").addHandler(Recompiles())
    net = model
    if a.compile == "inner":
        net = torch.compile(model, backend=a.compile_backend)
    class OwnForward(nn.parallel.DistributedDataParallel):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    ddp_class = OwnForward if a.subclass else nn.parallel.DistributedDataParallel
    ddp = ddp_class(
        net, bucket_cap_mb=a.bucket_cap_mb, gradient_as_bucket_view=a.grad_as_bucket_view,
        static_graph=a.static_graph, find_unused_parameters=a.find_unused)

    hook_calls = {}

    def mpi_allreduce_hook(state, bucket):
        buf = bucket.buffer()
        comm.Allreduce(MPI.IN_PLACE, buf.numpy(), op=MPI.SUM)
        buf.div_(world)
        hook_calls[bucket.index()] = hook_calls.get(bucket.index(), 0) + 1
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    if not a.gloo_buckets:
        ddp.register_comm_hook(None, mpi_allreduce_hook)
    # what runs the forwards: the DDP model, or its compiled wrapper
    fwd = torch.compile(ddp, backend=a.compile_backend) if a.compile == "outer" else ddp

    class ByHand:
        """SGD the job writes itself: no torch.optim optimizer, so no step hook."""
        def __init__(self, params):
            self.params = list(params)

        def zero_grad(self):
            for p in self.params:
                p.grad = None

        def step(self, closure=None):
            loss = closure() if closure is not None else None
            with torch.no_grad():
                for p in self.params:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-0.05)
            return loss

    def make_opt(params):
        if a.opt == "by-hand":
            return ByHand(params)
        if a.opt == "sgd":
            return torch.optim.SGD(params, lr=0.05, momentum=0.9)
        return torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)

    if a.two_opt:
        opts = [make_opt(model.body.parameters()), make_opt(model.heads.parameters())]
    else:
        opts = [make_opt(model.parameters())]
    if a.deepcopy:
        import copy
        opts = [copy.deepcopy(o) for o in opts]
        # the copies' param_groups hold copies of the parameters: point them back
        for o, src in zip(opts, ([model.body.parameters(), model.heads.parameters()] if a.two_opt
                                 else [model.parameters()])):
            o.param_groups[0]["params"] = list(src)
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) for o in opts] if a.sched else []
    scaler = None
    if a.scaler:
        try:  # torch >= 2.3: a GradScaler that works on the CPU
            scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        except (AttributeError, TypeError, RuntimeError):
            scaler = torch.cuda.amp.GradScaler(enabled=False)
    scale = scaler.scale if scaler is not None else (lambda t: t)

    bitmap = torch.zeros(4, dtype=torch.int32)
    bitmap_wrong = 0

    def data(step, n):
        g = torch.Generator().manual_seed(1000 * a.seed + 17 * step + rank)
        q = torch.randn(n, a.dim, generator=g)
        d = q + 0.3 * torch.randn(n, a.dim, generator=g)
        return q, d

    times, faults = [], []
    first_hook_calls = 0  # the comm hook's calls in the steps before --first
    import resource
    for step in range(a.steps):
        t0 = time.perf_counter()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        n = a.last_batch if (a.last_batch and step == a.steps - 1) else a.batch
        hook_calls.clear()
        cols = data(step, n)
        chunks = [(c, i) for c in range(2) for i in range(0, n, a.minibatch)]

        def backward_all():
            # 1. embed everything without grad, 2. loss on the cached embeddings
            with torch.no_grad():
                for _ in range(a.probe_forwards):
                    fwd(cols[0][:a.minibatch], 0)
                reps = [torch.cat([fwd(cols[c][i:i + a.minibatch], c)
                                   for i in range(0, n, a.minibatch)]) for c in range(2)]
            reps = [r.detach().requires_grad_() for r in reps]
            scores = F.normalize(reps[0], dim=1) @ F.normalize(reps[1], dim=1).t() / 0.1
            loss = F.cross_entropy(scores, torch.arange(n))
            loss.backward()
            # 3. re-embed each mini-batch with grad, backward the cached gradient
            extra = [chunks[0]] if a.extra_rank in (rank, -2) and step == a.extra_step else []
            for k, (c, i) in enumerate(chunks + extra):
                if rank == a.skip_rank and step == a.skip_step and k == 0:
                    continue
                last = k == len(chunks) - 1
                if step < a.first:
                    skip = {"per-minibatch": False, "local": True, "first-synced": k != 0,
                            "late-synced": step == 0 and not last}[a.first_way]
                else:
                    skip = a.mode == "no_sync" and not last
                ctx = ddp.no_sync() if skip else _Null()
                with ctx:
                    emb = fwd(cols[c][i:i + a.minibatch], c)
                    scale((emb * reps[c].grad[i:i + a.minibatch]).sum()).backward()
                if a.find_unused:
                    nonlocal_bitmap[0].fill_(1)
                    comm.Allreduce(MPI.IN_PLACE, nonlocal_bitmap[0].numpy(), op=MPI.SUM)
                    if int(nonlocal_bitmap[0][0]) != world:
                        nonlocal_bitmap[1] += 1
            return loss

        nonlocal_bitmap = [bitmap, 0]
        for o in opts:
            o.zero_grad()
        if a.closure:
            opts[0].step(backward_all)
            for o in opts[1:]:
                o.step()
        else:
            for _ in range(a.accum - 1):
                with ddp.no_sync():
                    backward_all()
            backward_all()
            if step < a.first and a.first_way in ("local", "first-synced"):
                # no backward synchronised, or only the first: the mean over the
                # ranks of .grad (a reduced part, the same on every rank, plus
                # local sums) is what synchronising every pass gives
                for p in model.parameters():
                    if p.grad is not None:
                        comm.Allreduce(MPI.IN_PLACE, p.grad.numpy(), op=MPI.SUM)
                        p.grad.div_(world)
            if a.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            for o in opts:
                if scaler is not None:
                    scaler.step(o)
                else:
                    o.step()
            if scaler is not None:
                scaler.update()
        bitmap_wrong += nonlocal_bitmap[1]
        for s in scheds:
            s.step()
        if step < a.first:
            first_hook_calls += sum(hook_calls.values())
        times.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()
    allp = comm.gather(flat, root=0)
    wrong = comm.reduce(bitmap_wrong, op=MPI.SUM, root=0)
    if a.compile != "none":
        from torch._dynamo.utils import counters
        dynamo = comm.gather(recompiles + [counters["frames"]["total"], counters["stats"]["unique_graphs"],
                              sum(counters["graph_break"].values())], root=0)
    if rank == 0:
        import numpy as np
        equal = all(np.array_equal(allp[0].view(np.uint32), x.view(np.uint32)) for x in allp)
        print("ranks_equal %d" % int(equal))
        print("digest %s" % hashlib.sha256(allp[0].tobytes()).hexdigest())
        print("buckets %d" % len(hook_calls))  # in the last step
        print("last_step_hook_calls %d" % sum(hook_calls.values()))
        print("dist_all_reduces %d" % dist_all_reduces[0])
        if a.first:
            print("first_hook_calls %d" % first_hook_calls)
        if a.find_unused:
            print("bitmap_wrong %d" % wrong)
        # which forward DDP runs: its class's, torch's own (the helper never
        # patches the class), and whether this instance was given its own
        # (the coalescing helper's, bound per instance)
        import inspect
        cf = (inspect.getsourcefile(nn.parallel.DistributedDataParallel.forward) or "?").replace(os.sep, "/")
        print("ddp_class_forward %s" % ("torch" if cf.endswith("torch/nn/parallel/distributed.py") else cf))
        print("ddp_instance_forward %s" % ("own" if "forward" in vars(ddp) else "class"))
        if a.compile != "none":
            # over every rank: Dynamo's recompilations (of any frame, of
            # this file's, of ccshim's helper), the frames it compiled (a
            # recompilation is one more), graphs, graph breaks
            print("recompiles %d\nrecompiles_model %d\nrecompiles_ccshim %d\ncompiled_frames %d\ngraphs %d\n"
                  "graph_breaks %d" % tuple(map(sum, zip(*dynamo))))
        if a.save:
            np.save(a.save, allp[0])
        if a.ref:
            ref = np.load(a.ref)
            print("maxdiff %.3g" % float(np.max(np.abs(ref.astype(np.float64) - allp[0]))))
        if a.time and len(times) > 3:
            print("step_ms %.3f" % (1000.0 * median(times[3:])))
            print("faults_per_step %d" % median(faults[3:]))
        sys.stdout.flush()
    dist.destroy_process_group()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        if "--refusal-rendezvous" not in sys.argv or not str(e).startswith("ccshim:"):
            raise
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Barrier()
        sys.exit(1)
