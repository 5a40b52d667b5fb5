"""The source report's reproduction (seeds/000) with sentence-transformers
6.0.1's own CachedLossMixin (sentence_transformers/base/losses/gradcache.py)
and torch 2.13, on every rank of an mpirun job instead of one process.

The report's TinyModel (Linear(DIM, DIM) on "input_ids"; with --dim 4,32
one model after the other, --steps steps each), its TinyCachedLoss
(in-batch cross-entropy over two columns, anchors and positives), BATCH rows
and mini-batches of MINIBATCH: CachedLossMixin's backward hook re-embeds and
back-propagates every mini-batch of every column (gradcache.py's
surrogate.backward()), so DDP reduces its bucket 2 * BATCH / MINIBATCH times
per step (16 rows, mini-batch 4: 8).  DDP's bucket goes through MPI
(rs_common.route_ddp_through_mpi), so ccshim counts it; the job's own count
of its comm hook calls is printed as the report printed it, and an SGD step
follows every backward (ccshim-run --torch marks it).

  mpirun -np 2 ccshim-run --torch -- python report_job.py [--steps 3] [--dim 4[,32]]
      [--plain-rank R] [--short-last] [--gather-loss] [--metric-rank R|all]

The hand-written loop of issue 41: --plain-rank R trains rank R with a plain
in-batch loss instead (both columns embedded with gradients, one backward:
one reduction per step where the others make 2 * BATCH / MINIBATCH);
--short-last makes every rank's last batch one mini-batch shorter;
--gather-loss gathers every rank's last loss after training
(torch.distributed.all_gather_object, on gloo, which ccshim does not
intercept), as the Trainer's own store_flos does.  (Not after every step: a
rank in it then meets the other's DDP bucket rebuild, a gloo broadcast inside
DDP's forward that no helper names, and both wait in gloo, beyond what
ccshim can tell apart.)  --metric-rank R: after every step each rank
all-reduces its loss over gloo (a metric), except rank R, which gathers it
to rank 0 instead (dist.gather): each waits in a different collective of
the default group, forever; --metric-rank all: every rank all-reduces it.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rs_common  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--minibatch", type=int, default=4)
    ap.add_argument("--dim", default="4", help="the model's Linear(DIM, DIM) (the report's: 4); "
                    "DIM,DIM2,...: one model after the other (4,32: the second one's 4224-byte bucket is "
                    "above ccshim-audit's 1 KiB threshold for its redundant-reduction finding)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--skip-rank", type=int, default=-1,
                    help="this rank's batch is one mini-batch shorter in step --skip-step "
                         "(one mini-batch fewer per column)")
    ap.add_argument("--skip-step", type=int, default=-1)
    ap.add_argument("--plain-rank", type=int, default=-1,
                    help="this rank runs a plain loss (one backward per step, no cache)")
    ap.add_argument("--short-last", action="store_true",
                    help="every rank's last batch is one mini-batch shorter")
    ap.add_argument("--gather-loss", action="store_true",
                    help="all_gather_object of the last loss after training (gloo)")
    ap.add_argument("--metric-rank", default="",
                    help="a gloo all_reduce of the loss after every step, a gather on rank R ('all': none)")
    ap.add_argument("--save", default="")
    ap.add_argument("--ref", default="")
    a = ap.parse_args()
    comm, rank, world = rs_common.start()
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from sentence_transformers.base.losses.gradcache import CachedLossMixin

    class TinyModel(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.linear = nn.Linear(dim, dim)

        def forward(self, features):
            return {"sentence_embedding": self.linear(features["input_ids"])}

    class TinyCachedLoss(nn.Module, CachedLossMixin):
        def __init__(self, model, mini_batch_size):
            super().__init__()
            self.model = model
            self.mini_batch_size = mini_batch_size

        def calculate_loss(self, reps, labels=None, *, with_backward=False):
            anchors, positives = torch.cat(reps[0]), torch.cat(reps[1])
            loss = F.cross_entropy(anchors @ positives.T, torch.arange(anchors.size(0)))
            if with_backward:
                loss.backward()
            return loss.detach()

        def forward(self, sentence_features, labels=None):
            return self.forward_cached(sentence_features, labels)

    rs_common.route_ddp_through_mpi()
    per_step, params = [], []
    step = 0
    for dim in map(int, a.dim.split(",")):
        torch.manual_seed(1)
        model = TinyModel(dim)
        ddp_model = nn.parallel.DistributedDataParallel(model)
        loss_fn = TinyCachedLoss(ddp_model, mini_batch_size=a.minibatch)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        params += list(model.parameters())
        for _ in range(a.steps):
            g = torch.Generator().manual_seed(100 * step + rank)
            n = a.batch
            anchors = {"input_ids": torch.randn(n, dim, generator=g)}
            positives = {"input_ids": anchors["input_ids"] + 0.3 * torch.randn(n, dim, generator=g)}
            if rank == a.skip_rank and step == a.skip_step:
                # a shorter batch on this rank: one mini-batch fewer per column
                anchors = {"input_ids": anchors["input_ids"][:n - a.minibatch]}
                positives = {"input_ids": positives["input_ids"][:n - a.minibatch]}
            if a.short_last and step == a.steps * len(a.dim.split(",")) - 1:
                anchors = {"input_ids": anchors["input_ids"][:n - a.minibatch]}
                positives = {"input_ids": positives["input_ids"][:n - a.minibatch]}
            rs_common.hook_calls.clear()
            opt.zero_grad()
            if rank == a.plain_rank:
                # both columns embedded with gradients, one backward
                reps = [ddp_model(anchors)["sentence_embedding"], ddp_model(positives)["sentence_embedding"]]
                loss = F.cross_entropy(reps[0] @ reps[1].T, torch.arange(reps[0].size(0)))
            else:
                loss = loss_fn([anchors, positives])
            loss.backward()
            opt.step()
            if a.metric_rank:
                import torch.distributed as dist
                metric = loss.detach().reshape(1).clone()
                if a.metric_rank != "all" and rank == int(a.metric_rank):
                    dist.gather(metric, dst=0)  # the metric gathered
                else:
                    dist.all_reduce(metric)  # the metric all-reduced
            per_step.append(sum(rs_common.hook_calls.values()))
            step += 1
    if a.gather_loss:
        import torch.distributed as dist
        losses = [None] * world
        dist.all_gather_object(losses, float(loss.detach()))
    counts = comm.gather(per_step, root=0)
    lines = ["mini-batches per column: %d, columns: 2" % (a.batch // a.minibatch)]
    if rank == 0:
        lines.append("DDP all-reduce dispatched per step (comm hook, rank 0): %s"
                     % " ".join(map(str, counts[0])))
        lines.append("hook_calls_all_ranks %s" % ";".join(",".join(map(str, c)) for c in counts))
    rs_common.finish(params, a.save, a.ref, lines)


if __name__ == "__main__":
    main()
