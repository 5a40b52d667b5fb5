"""pysites_job.py - real PyTorch DDP (Debian's torch on CPU, gloo) whose
gradient reductions go through MPI, where ccshim sees them: a comm hook
all-reduces bucket.buffer() in place with mpi4py.  A cached loss: the batch
is embedded without gradients, the loss's gradient with respect to the
embeddings is computed once, then each mini-batch is re-embedded and
back-propagated on its own, so DDP reduces every bucket once per mini-batch.

Run under mpirun with `ccshim-run --mpi --torch`:
    pysites_job.py [--steps N] [--mini M] [--skip RANK:STEP] [--explicit]
--skip: RANK skips its last mini-batch in STEP (a desync).
--explicit: after each step, two dist.all_reduce calls from two lines of
this file on a group whose all-reduce is mpi4py's (so ccshim sees them).
The lines of interest end in a "# LINE:name" comment; the test greps them.
"""
import argparse
import os

from mpi4py import MPI  # MPI_Init: ccshim's MPI layer starts here

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=3)
p.add_argument("--mini", type=int, default=4)
p.add_argument("--skip", default="")
p.add_argument("--explicit", action="store_true")
args = p.parse_args()
skip_rank, skip_step = (int(v) for v in args.skip.split(":")) if args.skip else (-1, -1)

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
dist.init_process_group("gloo", rank=rank, world_size=world)


def mpi_hook(state, bucket):
    """DDP's average of a bucket, through MPI."""
    buf = bucket.buffer()
    buf.div_(world)
    comm.Allreduce(MPI.IN_PLACE, buf.numpy(), op=MPI.SUM)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


class MPIGroup:
    """Enough of a process group for dist.all_reduce(t, group=...) (torch
    1.13 calls group.allreduce([t], opts) and waits on what it returns)."""

    class _Done:
        def wait(self):
            return True

    def allreduce(self, tensors, opts):
        for t in tensors:
            comm.Allreduce(MPI.IN_PLACE, t.numpy(), op=MPI.SUM)
        return self._Done()


torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)))
model.register_comm_hook(None, mpi_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
group = MPIGroup()
batch, m = 8 * args.mini, 8

for step in range(args.steps):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(batch, 16, generator=g)
    opt.zero_grad()
    with torch.no_grad():
        emb = model(x)
    emb.requires_grad_(True)
    loss = (emb.tanh() ** 2).sum()
    loss.backward()  # LINE:cache (no collective: emb is a leaf)
    cached = emb.grad
    for i in range(args.mini):
        if rank == skip_rank and step == skip_step and i == args.mini - 1:
            continue
        out = model(x[i * m:(i + 1) * m])
        out.backward(cached[i * m:(i + 1) * m])  # LINE:backward
    opt.step()
    if args.explicit:
        a = torch.ones(3)
        dist.all_reduce(a, group=group)  # LINE:explicit_a
        b = torch.ones(5)
        dist.all_reduce(b, group=group)  # LINE:explicit_b
        assert a.tolist() == [float(world)] * 3 and b.tolist() == [float(world)] * 5

w = model.module[0].weight.detach().double().sum().item()
print("rank %d done weight_sum %.6f" % (rank, w), flush=True)
comm.Barrier()  # LINE:final_barrier
dist.destroy_process_group()
