"""ccshim_ddpsync - coalescing as DDP's own no_sync(), without code changes.

Under `ccshim-run --torch --coalesce auto` (or every:N) ccshim first
coalesces at the level of the all-reduce: it learns that each gradient
bucket is reduced N times per optimizer step, agrees N across the ranks,
and answers N-1 of them locally.  DDP still copies every bucket, runs its
communication hook and copies back after every backward pass.  Once that
pattern is agreed (ccshim_coalesce_period() == N, and this model made N
synchronising forwards in each of the last two steps), this module makes
DDP itself skip the synchronisation for all but the N-th backward of each
step, the way no_sync() does: before each grad-enabled forward of the step
it clears the model's require_backward_grad_sync (restored right after the
forward, which is where DDP reads it), and leaves it set for the N-th.  DDP
then reduces once per step, from the gradients accumulated locally: the
result of the per-mini-batch reductions (docs/coalescing.md proves it), and
exactly what no_sync() gives.

Exactness rules:
- A step whose last backward did not synchronise (fewer forwards than N: a
  short last batch; or more: the extra ones skip too) leaves local sums in
  .grad.  Before the optimizer step (ccshim_torch.repair) the ranks first
  agree that they ended the step alike (ccshim_step_boundary, with the
  number of backward passes: a rank that skipped a mini-batch is a DESYNC
  naming both counts), then the model's .grad is averaged over its process
  group (the mean of the local sums is the synchronised value), and the
  model goes back to ccshim's own coalescing, which learns the pattern again.
- Forwards the job itself runs under no_sync() (gradient accumulation, as
  accelerate does) are left alone and not counted.
- Models this cannot see through are left to ccshim's all-reduce-level
  coalescing: static_graph=True (DDP's static graph does not support
  no_sync), DDP without a process group, several models with different N.

ccshim counts the avoided reductions in its closing line (second clause:
"avoided by the torch helper") and flags the one real reduction per bucket
and step that carries them (`coalesced` in the traces).
"""
import sys
import weakref

__all__ = ["wrap", "unreduced", "reduced_by_ddp", "repaired", "step_ended", "units"]


class _State(object):
    __slots__ = ("fw", "skipped", "synced_last", "K", "hist", "user_nosync")

    def __init__(self):
        self.fw = 0  # forwards of this step that would synchronise
        self.skipped = 0  # of them, made to skip
        self.synced_last = True  # the newest counted forward synchronised
        self.K = 0  # engaged: synchronise at the K-th forward only
        self.hist = []  # forwards of the last two steps
        self.user_nosync = False  # the job ran forwards under its own no_sync()


# Each model's state, by id(model) (read on every forward: a dictionary
# look-up, where a WeakKeyDictionary makes a weak reference per call;
# nothing is stored in the model itself, which the job may pickle); a
# finalizer drops it with the model.
_by_id = {}
_lib = None
_warn = None
_units = 0  # grad-enabled, synchronising forwards of every model this step
_engaged = False


def _state(model, create=True):
    st = _by_id.get(id(model))
    if st is None and create:
        st = _State()
        _by_id[id(model)] = st
        weakref.finalize(model, _by_id.pop, id(model), None)
    return st


def _all_states():
    return list(_by_id.values())


def enabled():
    """CCSHIM_TORCH_DDP_SKIP (default on; 0/no/off/false turns it off)."""
    import os
    return os.environ.get("CCSHIM_TORCH_DDP_SKIP", "1").strip().lower() not in ("0", "no", "off", "false")


def _eligible(model):
    return not getattr(model, "static_graph", False) and getattr(model, "process_group", None) is not None


def wrap(cls, functions, warn):
    """Wraps CLS.forward (DistributedDataParallel).  FUNCTIONS() returns
    ccshim's functions by name, WARN(msg, once=None) logs."""
    global _lib, _warn
    _lib, _warn = functions, warn
    if "_ccshim_forward" in cls.__dict__:
        return
    orig = cls.forward
    # Looked up once: the wrapper runs on every forward.
    import ctypes
    import torch
    grad_enabled = torch.is_grad_enabled
    word_fn = functions().get("ccshim_step_units_word")
    skipped_fn = functions().get("ccshim_coalesce_helper_skipped")
    if word_fn is None or skipped_fn is None:
        return
    units_word = ctypes.c_uint32.from_address(word_fn())  # a store per forward, not a foreign call
    states = _by_id

    def forward(self, *args, **kwargs):
        global _units
        if not grad_enabled():
            return orig(self, *args, **kwargs)
        # DDP reads require_backward_grad_sync, a plain attribute in its
        # __dict__ (set directly here: nn.Module.__setattr__ costs more); a
        # model without it there is not one this helper can see through
        d = self.__dict__
        sync = d.get("require_backward_grad_sync")
        if sync is None:
            return orig(self, *args, **kwargs)
        st = states.get(id(self)) or _state(self)
        if not sync:
            st.user_nosync = True
            return orig(self, *args, **kwargs)
        st.fw += 1
        _units += 1
        units_word.value = _units
        if st.K and st.fw != st.K:
            # Not the step's N-th backward: DDP accumulates locally.
            st.skipped += 1
            st.synced_last = False
            d["require_backward_grad_sync"] = False
            try:
                return orig(self, *args, **kwargs)
            finally:
                d["require_backward_grad_sync"] = True
        if st.K:
            skipped_fn(st.skipped)
        st.synced_last = True
        return orig(self, *args, **kwargs)

    cls.forward = forward
    cls._ccshim_forward = True


def wrapped(cls):
    """CLS.forward is this module's wrapper (bench/ddpsync_forward.py)."""
    return "_ccshim_forward" in cls.__dict__


def units():
    """This step's synchronising forwards, over every model."""
    return _units


def unreduced(models):
    """The models of MODELS whose .grad holds local sums (the step's last
    counted forward skipped its synchronisation)."""
    if _lib is None:
        return []
    out = []
    for m in models:
        st = _state(m, create=False)
        if st is not None and st.K and not st.synced_last:
            out.append(m)
    return out


# DDP with find_unused_parameters=True keeps its record of the parameters
# used across unsynchronised passes (so that no_sync() is exact when the
# last pass leaves a parameter unused) since pytorch PR 124193 (2024, fixing
# pytorch issue 69031).  Measured here: exact on torch 2.13, wrong on
# Debian's 1.13 (no_sync() itself leaves the ranks' parameters different).
# Trusted from the version verified; before it the gradients of such a
# model are averaged before every step, as under ccshim's own coalescing.
UNUSED_MAP_KEPT_SINCE = (2, 13)
_unused_map_kept = None


def _ddp_keeps_unused_map():
    global _unused_map_kept
    if _unused_map_kept is None:
        try:
            import torch
            v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        except (ImportError, ValueError):
            v = (0, 0)
        _unused_map_kept = v >= UNUSED_MAP_KEPT_SINCE
    return _unused_map_kept


def reduced_by_ddp(model):
    """MODEL's step ran with DDP skipping the synchronisation of all but its
    N-th backward, which synchronised, and DDP's one reduction is exact, as
    under no_sync(): with find_unused_parameters only on a torch whose DDP
    keeps the record of the parameters used across the unsynchronised
    passes (UNUSED_MAP_KEPT_SINCE)."""
    st = _state(model, create=False) if _lib is not None else None
    if st is None or not st.K or not st.synced_last or st.fw != st.K:
        return False
    return not getattr(model, "find_unused_parameters", False) or _ddp_keeps_unused_map()


def repaired(models, why):
    """MODELS' gradients were averaged: they go back to ccshim's coalescing."""
    global _engaged
    for m in models:
        st = _state(m, create=False)
        if st is not None:
            st.synced_last = True
            st.K = 0
            st.hist = []
    if _engaged and not any(st.K for st in _all_states()):
        _engaged = False
        helper = _lib().get("ccshim_coalesce_helper")
        if helper is not None:
            helper(0)
        _warn("step pattern broken (%s): DDP synchronises every backward again until ccshim "
              "has learned it anew" % why, once="ddpsync-off")


def step_ended(models):
    """After the step's marker: counts kept, and the models whose pattern
    ccshim agreed on skip DDP's synchronisation from the next step."""
    global _units, _engaged
    _units = 0
    if _lib is None:
        return
    lib = _lib()
    period = lib.get("ccshim_coalesce_period")
    helper = lib.get("ccshim_coalesce_helper")
    n = period() if period is not None and helper is not None else 0
    for m in models:
        st = _state(m, create=False)
        if st is None:
            continue
        st.hist = (st.hist + [st.fw])[-2:]
        if st.K and st.fw != st.K:
            # A different number of forwards with every one synchronised (the
            # N-th did, the rest were gradients the repair averaged): learn again.
            st.K = 0
        # Forwards the job ran under its own no_sync() (accumulation) are not
        # counted: what they accumulated is reduced with the rest at the N-th.
        if not st.K and n >= 2 and st.hist == [n, n] and _eligible(m):
            st.K = n
        st.fw = 0
        st.skipped = 0
        st.synced_last = True
        st.user_nosync = False
    want = any(st.K for st in _all_states())
    if want and not _engaged:
        if helper(1) == 0:
            _engaged = True
            _warn("DDP now synchronises once per step (at the %d-th backward), as under no_sync(): "
                  "ccshim agreed the pattern on every rank" % n, once="ddpsync-on")
        else:
            for st in _all_states():
                st.K = 0
    elif not want and _engaged:
        _engaged = False
        helper(0)
