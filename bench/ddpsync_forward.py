"""bench/ddpsync_forward.py - what the torch helper adds to a DDP forward.

One process (world size 1, gloo), the DDP model of tests/torch/ddp_job.py's
shape (16-32-32-8, mini-batch 32), the best of 7 timings of 5000 forwards:

  no_sync   each forward under the job's own `with ddp.no_sync():` (the code
            fix), run without ccshim
  helper    each forward through ccshim_ddpsync's wrapper on its skipping
            path (the state told to synchronise at a forward never reached),
            run under `ccshim-run --torch --coalesce auto`

prints "MODE US" (microseconds per forward).  usage: python3 ddpsync_forward.py MODE
"""
import os
import sys
import time


def main():
    mode = sys.argv[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
        s.close()
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 8))
    ddp = nn.parallel.DistributedDataParallel(model)
    x = torch.randn(32, 16)
    if mode == "helper":
        import ccshim_ddpsync
        if not ccshim_ddpsync.attached(ddp):
            sys.exit("ddpsync_forward: the helper did not wrap DDP's forward (run under ccshim-run --torch "
                     "--coalesce auto)")
        ccshim_ddpsync._state(ddp).K = 1 << 30  # every forward skips

    def timed(n):
        t = time.perf_counter()
        if mode == "no_sync":
            for _ in range(n):
                with ddp.no_sync():
                    ddp(x)
        else:
            for _ in range(n):
                ddp(x)
        return (time.perf_counter() - t) / n * 1e6

    timed(2000)
    print("%s %.2f" % (mode, min(timed(5000) for _ in range(7))))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
