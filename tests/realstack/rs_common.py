"""Shared by the real-stack tier's jobs (tests/realstack/*.py): the source
report's stack (torch 2.13, sentence-transformers 6.0.1) on the CPU, one
process per rank under mpirun.

- start(): checks the versions, then sets up torch.distributed's gloo
  process group from Open MPI's environment (RANK/WORLD_SIZE/LOCAL_RANK from
  OMPI_COMM_WORLD_*, MASTER_PORT chosen by rank 0 and broadcast over MPI).
- route_ddp_through_mpi(): every DistributedDataParallel model built from now
  on (the Trainer builds its own in accelerate's prepare()) gets a comm hook
  that all-reduces its buckets with mpi4py (SUM in place, then divided by the
  world size), so that ccshim, preloaded into the MPI library, sees every
  bucket reduction.  gloo only sets the group up.
- finish(): rank 0 gathers every rank's parameters and prints
  "ranks_equal 1" when they are bitwise equal, "digest SHA256",
  "dist_all_reduces N" (its torch.distributed.all_reduce calls from Python),
  "maxdiff X" against --ref FILE, and saves them to --save FILE.
"""
import hashlib
import os
import sys

# the gloo process group as the torch tests set it up (tests/torch/gloo_group.py)
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "torch"))
import gloo_group  # noqa: E402

# the versions this tier was written for; another one is refused by name
TORCH_VERSION = "2.13.0"
ST_VERSION = "6.0.1"

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DISABLE_TQDM", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

hook_calls = {}  # bucket index -> comm hook calls since the last clear
# torch.distributed.all_reduce calls from Python since start(): besides the
# job's own, ccshim_torch's gradient averagings (gloo)
dist_all_reduces = [0]


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def fail(msg):
    sys.stderr.write("realstack: error: %s\n" % msg)
    sys.stderr.flush()
    sys.exit(3)


def check_versions(need_st=True):
    """The imported torch and sentence-transformers are those of this tier,
    or the job ends naming the version found (exit 3)."""
    import torch
    if torch.__version__.split("+")[0] != TORCH_VERSION:
        fail("this test was written for torch %s, found torch %s (%s)"
             % (TORCH_VERSION, torch.__version__, torch.__file__))
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        fail("torch %s has no torch.distributed with gloo" % torch.__version__)
    if need_st:
        try:
            import sentence_transformers as st
        except ImportError as e:
            fail("cannot import sentence_transformers: %s" % e)
        if st.__version__ != ST_VERSION:
            fail("this test was written for sentence-transformers %s, found %s (%s)"
                 % (ST_VERSION, st.__version__, st.__file__))


def start(need_st=True, timeout_s=0):
    """Versions checked, MPI and the gloo process group up: (comm, rank, world)."""
    check_versions(need_st)
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    comm, rank, world = gloo_group.init(timeout_s)
    real_all_reduce = dist.all_reduce

    def counting_all_reduce(*args, **kwargs):
        dist_all_reduces[0] += 1
        return real_all_reduce(*args, **kwargs)

    dist.all_reduce = counting_all_reduce
    return comm, rank, world


def mpi_allreduce_hook(state, bucket):
    """DDP comm hook: the bucket all-reduced through MPI (SUM, then / world)."""
    from mpi4py import MPI
    import torch
    buf = bucket.buffer()
    comm = MPI.COMM_WORLD
    comm.Allreduce(MPI.IN_PLACE, buf.numpy(), op=MPI.SUM)
    buf.div_(comm.Get_size())
    hook_calls[bucket.index()] = hook_calls.get(bucket.index(), 0) + 1
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def route_ddp_through_mpi():
    """Registers mpi_allreduce_hook on every DDP model built from now on
    (and returns the list they are appended to)."""
    import torch.nn.parallel.distributed as ddp_mod
    cls = ddp_mod.DistributedDataParallel
    models = []
    if getattr(cls, "_rs_routed", False):
        return cls._rs_models
    orig_init = cls.__init__

    def __init__(self, *a, **kw):
        orig_init(self, *a, **kw)
        self.register_comm_hook(None, mpi_allreduce_hook)
        models.append(self)

    cls.__init__ = __init__
    cls._rs_routed = True
    cls._rs_models = models
    return models


def finish(params, save="", ref="", extra=()):
    """Rank 0 prints ranks_equal, digest, maxdiff (with REF), EXTRA lines;
    saves to SAVE.  Then the process group ends."""
    from mpi4py import MPI
    import numpy as np
    import torch
    import torch.distributed as dist
    comm = MPI.COMM_WORLD
    flat = torch.cat([p.detach().float().reshape(-1) for p in params]).numpy().copy()
    allp = comm.gather(flat, root=0)
    if comm.Get_rank() == 0:
        equal = all(np.array_equal(allp[0].view(np.uint32), x.view(np.uint32)) for x in allp)
        print("ranks_equal %d" % int(equal))
        print("params %d" % allp[0].size)
        print("digest %s" % hashlib.sha256(allp[0].tobytes()).hexdigest())
        print("dist_all_reduces %d" % dist_all_reduces[0])
        for line in extra:
            print(line)
        if save:
            np.save(save, allp[0])
        if ref:
            r = np.load(ref)
            print("maxdiff %.3g" % float(np.max(np.abs(r.astype(np.float64) - allp[0]))))
        sys.stdout.flush()
    comm.Barrier()
    dist.destroy_process_group()
