"""pysite_call.py - per-call cost of a torch.distributed-style call with and
without ccshim_sites' annotation, in one process under
`ccshim-run --mpi --torch` (bench/pysite-bench.sh): an 8-byte MPI_Allreduce
through mpi4py, called plain and through ccshim_sites.annotated, runs
alternated, best of each."""
import sys
import time

import numpy as np
from mpi4py import MPI

import ccshim_sites

comm = MPI.COMM_WORLD
buf = np.zeros(1, dtype=np.float64)
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


def call():
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)


if ccshim_sites._library() is None:
    sys.exit("libccshim is not preloaded")
wrapped = ccshim_sites.annotated(call)
noop = lambda: None  # noqa: E731
wrapped_noop = ccshim_sites.annotated(noop)


def timed(fn, n):
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e9


res = {"plain": [], "annotated": [], "noop": [], "noop_annotated": []}
for trial in range(5):
    res["plain"].append(timed(call, iters))
    res["annotated"].append(timed(wrapped, iters))
    res["noop"].append(timed(noop, iters * 5))
    res["noop_annotated"].append(timed(wrapped_noop, iters * 5))
if comm.Get_rank() == 0:
    for k, v in res.items():
        print("%s_ns %.1f" % (k, min(v)))
