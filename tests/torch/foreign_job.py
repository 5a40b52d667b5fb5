"""A job whose ranks meet in an MPI all-reduce (mpi4py, intercepted by
ccshim) and in a torch.distributed collective on gloo (not intercepted):
tests/torch/gloo-blocked.sh.

--shape deadlock: rank 1 enters a gloo collective (--call) while rank 0
waits in the MPI all-reduce: each waits for the other, forever.
--shape healthy: rank 0 computes (sleeps --compute s) while rank 1 waits
in the gloo collective; then rank 0 joins it and both all-reduce.
Rank 0 prints "done" at the end."""
import argparse
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=("deadlock", "healthy"), required=True)
    ap.add_argument("--call", choices=("all_gather", "barrier"), default="all_gather")
    ap.add_argument("--compute", type=float, default=3.0)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from mpi4py import MPI
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    import gloo_group
    comm, rank, world = gloo_group.init()
    x = torch.ones(4)

    def gloo_call():
        if a.call == "barrier":
            dist.barrier()
        else:
            dist.all_gather([torch.zeros(4) for _ in range(world)], x)

    comm.Allreduce(MPI.IN_PLACE, x.numpy(), op=MPI.SUM)
    if a.shape == "deadlock":
        if rank == 1:
            gloo_call()  # the gloo call
        comm.Allreduce(MPI.IN_PLACE, x.numpy(), op=MPI.SUM)  # the MPI call
    else:
        if rank == 0:
            time.sleep(a.compute)
        gloo_call()
        comm.Allreduce(MPI.IN_PLACE, x.numpy(), op=MPI.SUM)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
