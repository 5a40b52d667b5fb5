"""ccshim_sites - names the Python line behind every collective for ccshim.

`ccshim-run --torch -- python train.py` puts this directory first on
PYTHONPATH; its sitecustomize.py calls install().  As torch imports them,
install() wraps

  * torch.autograd.backward (which Tensor.backward calls) and
    torch.autograd.grad: the gradient reductions DDP issues during the
    backward pass, from the autograd engine's threads or from a comm hook,
    carry the line of the backward() call;
  * the collectives and point-to-point calls of torch.distributed
    (all_reduce, all_gather, broadcast, reduce_scatter, barrier, ...): they
    carry the line that called them.  While a blocking collective runs on a
    backend ccshim does not intercept (gloo), the rank says it is inside it
    (ccshim_foreign_begin/end, "torch.distributed.all_gather (gloo) at
    trainer.py:12 in main"): desync detection then names a rank blocked
    there, not one computing (docs/desync.md).  The job's main thread's
    collectives are numbered per process group (as the user wrote them:
    all_gather_object is one call, not the two all_gathers inside it), and
    a blocking one is given to ccshim with its group, number and kind
    (ccshim_foreign_call), so that ranks blocked in different calls of one
    group are told apart; ccshim records each such call the job wrote, on
    any thread (ccshim_foreign_call's end, ccshim_foreign_issued for
    async_op=True), for ccshim-audit to count (backend torch.distributed).

  * with `ccshim-run --python` (or --torch), the methods of mpi4py's
    communicators that issue MPI calls (collectives, point-to-point,
    constructors), on MPI.COMM_WORLD, MPI.COMM_SELF and the communicators
    duplicated from them (_hook_mpi4py says why only those).

The line is the caller's first frame outside torch, mpi4py and ccshim, written
"file.py:318 in train_step" (the file's base name).  Each distinct line is
handed to libccshim once (ccshim_annotate, which interns it); afterwards a
call costs a frame walk, a dictionary look-up and two stores into ccshim's
current-site word (ccshim_annotate_word: set, then restore what was current).  ccshim records the line's id in
every collective issued meanwhile, on any thread; ccshim-audit and desync
verdicts show the text (docs/python-sites.md).

Nothing is wrapped when libccshim is not preloaded, and nothing of this
module is loaded without `--torch` or `--python`.  Works with torch 1.13
and 2.x, and mpi4py 3.1.
"""
import ctypes
import functools
import hashlib
import ccshim_imports
import ccshim_lib
import os
import sys
import threading

__all__ = ["install", "annotated"]

# torch.distributed functions that issue communication, where they exist
# (names differ between torch versions; missing ones are skipped).
_DIST_FUNCTIONS = (
    "all_reduce", "all_reduce_coalesced", "all_reduce_multigpu", "all_gather", "all_gather_coalesced",
    "all_gather_into_tensor", "_all_gather_base", "all_gather_object", "all_gather_multigpu", "broadcast",
    "broadcast_multigpu", "broadcast_object_list", "reduce", "reduce_multigpu", "reduce_scatter",
    "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter_multigpu", "all_to_all",
    "all_to_all_single", "gather", "gather_object", "scatter", "scatter_object_list", "barrier",
    "monitored_barrier", "send", "recv", "isend", "irecv", "batch_isend_irecv",
)
_AUTOGRAD_FUNCTIONS = ("backward", "grad")
# Not collectives: a rank inside one of these waits for one peer, or not at
# all, and says nothing of where the others are.
_POINT_TO_POINT = ("send", "recv", "isend", "irecv", "batch_isend_irecv")
# Backends whose collectives ccshim intercepts itself (their calls are seen
# blocked in the library).
_INTERCEPTED = ("nccl", "mpi")

_installed = False
_lib = None  # (annotate, the current-site word, foreign_begin, foreign_end, foreign_call) of the preloaded libccshim
_ids = {}  # (code object, line) -> interned id
_texts = {}  # interned id -> its text
_skip_dirs = ()  # frames in these directories are not the caller's
_tls = threading.local()  # .depth: torch.distributed calls this thread is inside
# id(process group) -> [the group, its identity, collectives counted, the
# last one's name, still numbered, this rank in it, its size]: the job's main
# thread's collectives on it
_groups = {}


def _warn(msg):
    ccshim_lib.warn("ccshim_sites", msg)


def _library():
    """(ccshim_annotate, the current-site word, foreign_begin, foreign_end,
    foreign_call) of the preloaded libccshim (the last three None when it
    lacks them), or None."""
    global _lib
    if _lib is None:
        f = ccshim_lib.functions()
        annotate, word = f.get("ccshim_annotate"), f.get("ccshim_annotate_word")
        if annotate is None or word is None:
            return None
        begin, end = f.get("ccshim_foreign_begin"), f.get("ccshim_foreign_end")
        if begin is None or end is None:
            begin = end = None
        call = f.get("ccshim_foreign_call") if begin is not None else None
        # Setting the site is then one store, not a foreign call (ccshim.h).
        _lib = (annotate, ctypes.c_uint32.from_address(word()), begin, end, call)
    return _lib


def _site_id(depth):
    """The interned id of the line that called the function DEPTH frames up,
    first outside torch and ccshim (interned and made current on first
    sight), or 0 when there is none."""
    f = sys._getframe(depth + 1)
    while f is not None and f.f_code.co_filename.startswith(_skip_dirs):
        f = f.f_back
    if f is None:
        return 0
    key = (f.f_code, f.f_lineno)
    i = _ids.get(key)
    if i is None:
        text = "%s:%d in %s" % (os.path.basename(f.f_code.co_filename), f.f_lineno, f.f_code.co_name)
        # printable ASCII only: the tools print it in tables, HTML and JSON
        data = text.encode("ascii", "replace")[:199]
        i = _lib[0](data)  # interns and makes it current
        _ids[key] = i
        _texts[i] = data
    return i


def _group_arg(dist, args, kwargs):
    """The process group a torch.distributed call was given (None: the default)."""
    group = kwargs.get("group")
    if group is None:
        # the positional group of the common signatures
        pg = getattr(dist, "ProcessGroup", None)
        for a in args:
            if pg is not None and isinstance(a, pg):
                return a
    return group


def _foreign_name(name, args, kwargs):
    """b"torch.distributed.NAME (BACKEND)" and its group's size when the call
    runs on a backend ccshim does not intercept, else None."""
    dist = sys.modules.get("torch.distributed")
    try:
        group = _group_arg(dist, args, kwargs)
        backend = str(dist.get_backend(group)).lower()
        size = dist.get_world_size(group)
    except Exception:
        return None  # no process group (yet): the call fails by itself
    # "cpu:gloo,cuda:nccl": a device's tensors may go through an intercepted
    # backend, where they are recorded and compared already (as
    # ccshim_torch.uncovered_backend reads it).
    names = [part.split(":")[-1].strip() for part in backend.split(",")]
    names = [n for n in names if n]
    if not names or any(n in _INTERCEPTED for n in names):
        return None
    return ("torch.distributed.%s (%s)" % (name, names[0])).encode("ascii", "replace"), size


def _group_state(dist, group):
    """The _groups entry of GROUP (None: the default group), made on first
    sight; None when this rank is not a member or there is no process group.
    Its identity is the same on every member: a hash of torch's name for the
    group (given alike to every member, in creation order) and its global
    ranks."""
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    try:
        pg = group if group is not None else c10d._get_default_group()
        st = _groups.get(id(pg))
        if st is not None and st[0] is pg:
            return st
        if hasattr(dist, "get_process_group_ranks"):
            ranks = sorted(dist.get_process_group_ranks(pg))
        else:  # torch 1.13
            ranks = sorted(c10d._pg_group_ranks[pg])
        name = getattr(pg, "group_name", None)
        if not name and hasattr(c10d, "_pg_names"):
            name = c10d._pg_names.get(pg, "")
        rank, size = dist.get_rank(pg), dist.get_world_size(pg)
        if not 0 <= rank < size:
            return None
    except Exception:
        return None  # not a member (the call returns at once), or no process group yet
    h = hashlib.blake2b(repr((str(name), ranks)).encode(), digest_size=8).digest()
    st = [pg, int.from_bytes(h, "little") or 1, 0, None, True, rank, size]
    _groups[id(pg)] = st
    return st


def _number(name, args, kwargs):
    """Numbers the collective NAME, a call the job wrote, on its group: (the
    group's _groups entry, the call's number on it or 0, the name of the one
    before it), or None without a group.  Only the main thread's calls are
    numbered: another thread's interleave with them in an order the other
    members cannot know (the group is then numbered no more)."""
    dist = sys.modules.get("torch.distributed")
    st = _group_state(dist, _group_arg(dist, args, kwargs))
    if st is None:
        return None
    if threading.current_thread() is not threading.main_thread():
        st[4] = False
    if not st[4]:
        return st, 0, None
    st[2] += 1
    prev, st[3] = st[3], name
    return st, st[2], prev


def annotated(fn, collective=None, keep_outer=False):
    """FN wrapped so that what it issues carries its caller's Python line;
    COLLECTIVE: its torch.distributed name, when it is a collective;
    KEEP_OUTER: inside another wrapped call that call's line stands (an
    mpi4py call from a DDP comm hook during backward() keeps the
    backward's line)."""
    if getattr(fn, "_ccshim_annotated", False):
        return fn
    word, begin, end, call = _lib[1], _lib[2], _lib[3], _lib[4]
    issued = ccshim_lib.function("ccshim_foreign_issued") if call is not None else None
    if begin is None:
        collective = None

    def say(what, size, numbered, nonblocking):
        """Tells libccshim of the call; True when ccshim_foreign_end must follow."""
        if numbered is not None and call is not None:
            st, seq, before = numbered
            if nonblocking:
                if issued is not None:
                    issued(st[1], st[5], st[6], collective.encode())
                return False
            call(what, st[1], st[5], st[6], seq, collective.encode(),
                 before.encode() if before is not None else None)
            return True
        if nonblocking:
            return False
        begin(what, size)
        return True

    def run(args, kwargs, numbered):
        prev = word.value  # before _site_id, which makes a new line current when it interns it
        i = 0 if keep_outer and prev else _site_id(2)
        if not i:  # no frame of the job's own (a hook on an autograd thread): keep the current line
            return fn(*args, **kwargs)
        word.value = i
        foreign = _foreign_name(collective, args, kwargs) if collective else None
        ended = False
        if foreign is not None:
            what = foreign[0] + b" at " + _texts.get(i, b"?")
            ended = say(what, foreign[1], numbered, kwargs.get("async_op", False))
        try:
            return fn(*args, **kwargs)
        finally:
            if ended:
                end()
            word.value = prev

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        depth = getattr(_tls, "depth", 0)
        # Only the call the job wrote is numbered and recorded, not those it
        # makes inside (all_gather_object's all_gathers).
        numbered = _number(collective, args, kwargs) if collective and depth == 0 else None
        _tls.depth = depth + 1
        try:
            return run(args, kwargs, numbered)
        except BaseException:
            # A call that failed may have reached the backend on some members
            # only: the group's numbers are no longer comparable.
            if numbered is not None:
                numbered[0][4] = False
            raise
        finally:
            _tls.depth = depth

    wrapper._ccshim_annotated = True
    return wrapper


def _wrap_all(module, names, also=(), collectives=False):
    """Wraps MODULE's functions NAMES (those it has), and the same objects
    where the modules in ALSO re-export them; COLLECTIVES: they are
    torch.distributed's (those not point-to-point say so while they run)."""
    n = 0
    for name in names:
        fn = getattr(module, name, None)
        if fn is None or not callable(fn) or getattr(fn, "_ccshim_annotated", False):
            continue
        w = annotated(fn, name if collectives and name not in _POINT_TO_POINT else None)
        setattr(module, name, w)
        for other in also:
            if other is not None and getattr(other, name, None) is fn:
                setattr(other, name, w)
        n += 1
    return n


def _torch_dir(module, depth):
    """The torch package's directory, DEPTH levels above MODULE's file."""
    d = os.path.abspath(module.__file__)
    for _ in range(depth):
        d = os.path.dirname(d)
    return d + os.sep


def _skip(package_dir):
    """Frames in PACKAGE_DIR (torch's, mpi4py's) and in this file are not
    the caller's."""
    global _skip_dirs
    _skip_dirs = tuple(sorted(set(_skip_dirs) | {package_dir, os.path.abspath(__file__)}))


def _hook_c10d(c10d):
    """Wraps the collectives of torch.distributed.distributed_c10d (and where
    torch.distributed re-exports them, if it already did)."""
    _skip(_torch_dir(c10d, 2))
    _wrap_all(c10d, _DIST_FUNCTIONS, (sys.modules.get("torch.distributed"),), collectives=True)


def _hook_autograd(autograd):
    """Wraps torch.autograd.backward (Tensor.backward calls it) and grad."""
    _skip(_torch_dir(autograd, 2))
    _wrap_all(autograd, _AUTOGRAD_FUNCTIONS)


# The methods of mpi4py's communicators that issue the MPI calls ccshim
# records (those a class has are wrapped).
_MPI_METHODS = (
    "Barrier", "barrier", "Bcast", "bcast", "Gather", "Gatherv", "gather", "Scatter", "Scatterv", "scatter",
    "Allgather", "Allgatherv", "allgather", "Alltoall", "Alltoallv", "Alltoallw", "alltoall", "Reduce", "reduce",
    "Allreduce", "allreduce", "Reduce_scatter", "Reduce_scatter_block", "Scan", "scan", "Exscan", "exscan",
    "Ibarrier", "Ibcast", "Igather", "Igatherv", "Iscatter", "Iscatterv", "Iallgather", "Iallgatherv", "Ialltoall",
    "Ialltoallv", "Ialltoallw", "Ireduce", "Iallreduce", "Ireduce_scatter", "Ireduce_scatter_block", "Iscan",
    "Iexscan", "Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
    "Neighbor_alltoallw", "Ineighbor_allgather", "Ineighbor_allgatherv", "Ineighbor_alltoall",
    "Ineighbor_alltoallv", "Ineighbor_alltoallw", "neighbor_allgather", "neighbor_alltoall",
    "Send", "Recv", "Sendrecv", "Sendrecv_replace", "Ssend", "Bsend", "Rsend", "Isend", "Irecv", "Issend",
    "Ibsend", "Irsend", "send", "recv", "sendrecv", "ssend", "bsend", "isend", "irecv", "issend", "ibsend",
    "Dup", "Idup", "Dup_with_info", "Clone", "Split", "Split_type", "Create", "Create_group", "Create_cart",
    "Create_graph", "Create_dist_graph", "Create_dist_graph_adjacent", "Create_intercomm", "Merge", "Free",
)


def _hook_mpi4py(mpi):
    """mpi4py's classes are immutable extension types: their methods cannot
    be replaced.  So each communicator class gets a subclass with the
    methods wrapped (same name, module and behaviour), and MPI.COMM_WORLD
    and MPI.COMM_SELF become instances of those (the same MPI handles;
    equal to the originals).  mpi4py makes a duplicate (Dup, Idup, Clone)
    of the class of the communicator it duplicates, so duplicates carry
    the lines too; a communicator that mpi4py makes of its own classes
    (Split, Create, the topologies, Comm.f2py) keeps the native site, and
    type(MPI.COMM_WORLD) is the subclass, not MPI.Intracomm."""
    _skip(os.path.dirname(os.path.abspath(mpi.__file__)) + os.sep)
    subs = {}
    for name in ("Intracomm", "Intercomm", "Cartcomm", "Graphcomm", "Distgraphcomm"):
        base = getattr(mpi, name, None)
        if base is None:
            continue
        ns = {"__module__": base.__module__, "__qualname__": base.__qualname__, "__doc__": base.__doc__}
        for m in _MPI_METHODS:
            fn = getattr(base, m, None)
            if fn is not None and callable(fn):
                ns[m] = annotated(fn, keep_outer=True)
        subs[name] = type(name, (base,), ns)
    for name in ("COMM_WORLD", "COMM_SELF"):
        comm = getattr(mpi, name, None)
        sub = subs.get(type(comm).__name__)
        if comm is not None and sub is not None and type(comm) is getattr(mpi, type(comm).__name__):
            setattr(mpi, name, sub(comm))


# Each module is wrapped when it has been executed, so nothing here imports
# torch itself (torch imports these two in the middle of its own import).
_HOOKS = {"torch.autograd": _hook_autograd, "torch.distributed.distributed_c10d": _hook_c10d,
          "mpi4py.MPI": _hook_mpi4py}


def install():
    """Wraps torch.autograd, torch.distributed and mpi4py.MPI now if they
    are imported, else when they are.  Does nothing when libccshim is not
    preloaded."""
    global _installed
    if _installed:
        return
    _installed = True
    if _library() is None:
        return
    for name, hook in _HOOKS.items():
        ccshim_imports.when_imported(
            name, hook, lambda n, e: _warn("could not name Python call sites in %s: %r" % (n, e)))
