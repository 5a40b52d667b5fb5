"""A CPU DistributedDataParallel job as torchrun starts it
(tests/realstack/torchrun-gloo.sh): the process group on gloo, which
ccshim does not intercept, a small model and 5 optimizer steps; rank 0
prints "steps 5" at the end."""
import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 5
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 8)).sum().backward()
        opt.step()
    if dist.get_rank() == 0:
        print("steps %d" % steps, flush=True)
    # The model (its reducer holds the group's work) goes before the group:
    # destroyed the other way round at exit, torch 2.13 at times aborts
    # ("terminate called without an active exception") or hangs in gloo.
    dist.barrier()
    del model, opt
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
