"""A job whose ranks meet only in torch.distributed collectives on gloo
(which ccshim does not intercept): tests/torch/gloo-calls.sh.

--shape gather: three all_reduces of the default group on both ranks, then
  rank 0 in a fourth all_reduce while rank 1 is in a gather to rank 1: each
  waits for the other, forever (the hand-written loop where one rank
  gathers a metric that the other does not).
--shape healthy: the same calls on both ranks (three all_reduces, an
  all_reduce, a gather to rank 1), rank 1 slow (sleeps --slow s) before the
  last two.
--shape groups (3 ranks): rank 0 in an all_reduce of group A (ranks 0,
  2), rank 1 in a broadcast of group B (ranks 1, 2), each the first call of
  its group, while rank 2 sleeps --slow s, then joins A's call and B's.
--shape object: all_gather_object (two gloo all_gathers inside) on both
  ranks, rank 1 slow (--slow s) before it, then an all_reduce; twice.
--shape count: three steps (marked: ccshim_step_mark), each with two
  all_reduces, an all_gather_object, a broadcast and an all_reduce with
  async_op=True (waited for), then a barrier: what ccshim-audit must count
  (tests/audit/audit-torch.sh).
Rank 0 prints "done" at the end."""
import argparse
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=("gather", "healthy", "groups", "object", "count"), required=True)
    ap.add_argument("--slow", type=float, default=1.5)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    import gloo_group
    comm, rank, world = gloo_group.init()
    x = torch.ones(4)
    if a.shape == "gather":
        for _ in range(3):
            dist.all_reduce(x)
        if rank == 0:
            dist.all_reduce(x)  # the all_reduce
        else:
            dist.gather(x, [torch.zeros(4) for _ in range(world)], dst=1)  # the gather
    elif a.shape == "healthy":
        for _ in range(3):
            dist.all_reduce(x)
        if rank == 1:
            time.sleep(a.slow)
        dist.all_reduce(x)
        if rank == 1:
            time.sleep(a.slow)
        dist.gather(x, [torch.zeros(4) for _ in range(world)] if rank == 1 else None, dst=1)
    elif a.shape == "groups":
        ga, gb = dist.new_group([0, 2]), dist.new_group([1, 2])
        if rank == 0:
            dist.all_reduce(x, group=ga)
        elif rank == 1:
            dist.broadcast(x, 2, group=gb)
        else:
            time.sleep(a.slow)
            dist.all_reduce(x, group=ga)
            dist.broadcast(x, 2, group=gb)
    elif a.shape == "count":
        import ccshim_lib
        mark = ccshim_lib.function("ccshim_step_mark")
        for _ in range(3):
            dist.all_reduce(x)
            dist.all_reduce(x)
            out = [None] * world
            dist.all_gather_object(out, rank)
            dist.broadcast(x, 0)
            dist.all_reduce(x, async_op=True).wait()
            mark()
    else:
        for _ in range(2):
            if rank == 1:
                time.sleep(a.slow)
            out = [None] * world
            dist.all_gather_object(out, {"rank": rank, "loss": 0.5})
            assert [o["rank"] for o in out] == list(range(world))
            dist.all_reduce(x)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
