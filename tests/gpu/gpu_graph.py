"""gpu_graph.py - an NCCL all-reduce captured in a CUDA graph (check 7 of
tests/gpu/run-device-checks.sh), one rank on device 0.

A small all-reduce (16 bytes, below coalescing's floor) creates the
communicator eagerly; then torch.cuda.graph captures "x += 1; all_reduce(x)"
on a 4096-float tensor (eligible for coalescing), and the graph is replayed
REPLAYS times.  With one rank the all-reduce is the identity, so x ends at
1 + REPLAYS exactly when every replay ran.  Prints one line:

    graph captured ok replays N x F expected E

Exit status 0 when x is as expected, 1 otherwise."""
import argparse
import os
import sys

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--replays", type=int, default=3)
ap.add_argument("--port", type=int, default=29571)
a = ap.parse_args()
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(a.port))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
small = torch.ones(4, device="cuda")
dist.all_reduce(small)  # eager: the communicator exists before the capture
torch.cuda.synchronize()
x = torch.zeros(4096, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    x += 1
    dist.all_reduce(x)
torch.cuda.synchronize()
for _ in range(a.replays):
    g.replay()
torch.cuda.synchronize()
v = float(x[0].item())
ok = bool(torch.all(x == 1 + a.replays).item())
print("graph captured ok replays %d x %g expected %d" % (a.replays, v, 1 + a.replays))
dist.destroy_process_group()
sys.exit(0 if ok else 1)
