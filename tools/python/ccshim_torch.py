"""ccshim_torch - marks every PyTorch optimizer step for ccshim and makes sure
no optimizer step reads gradients that coalescing left unreduced.

`ccshim-run --torch -- python train.py` puts this directory first on
PYTHONPATH; its sitecustomize.py calls install(), which waits for torch to be
imported by the job and then hooks it.  No change to the job.  Works with
torch 1.13 to current.

Before every optimizer step (torch's global step pre-hook on torch >= 2.0; a
per-instance wrapper of Optimizer.step, kept a bound method, before 2.0):

1. Several optimizers stepping in one iteration mark one step: a step is
   marked when collectives were issued since the last mark
   (ccshim_step_collectives() > 0) or when this optimizer already stepped
   since the last mark; otherwise this optimizer steps in the iteration
   that is already marked and nothing else is done.
2. Repair: if ccshim_coalesce_pending() > 0 (a deferred all-reduce is still
   waiting for its real reduction: a short last batch, a bucket rebuilt
   mid-step, an every:N that does not match), the .grad of every parameter
   of every DistributedDataParallel model is averaged over the model's
   process group (all_reduce SUM, then divided by its size) and ccshim is
   told so (ccshim_coalesce_complete(CCSHIM_COMPLETE_BY_CALLER)); one log
   line says so.  DDP copied its buckets into .grad, where ccshim cannot
   reach; averaging gradients that were already reduced leaves them as
   they are (up to the last bit with more than two ranks).  Without a DDP
   model, ccshim completes its own buffers (CCSHIM_COMPLETE_REDUCE).
   Every rank of a job in step has the same deferred reductions pending, so
   every rank takes the same branch and the repair's all-reduce matches.
   Before it, ccshim_coalesce_boundary() checks that over ccshim's side
   channel: a rank that made a different number of backward passes in the
   step is a DESYNC, and the repair is not issued (RuntimeError instead of a
   wait for ranks that are elsewhere; under --on-desync abort ccshim ends
   the job first).
3. ccshim_step_mark().

The repair also runs where gradients are read before the step:
GradScaler.unscale_ (scaler.step calls it before optimizer.step),
torch.nn.utils.clip_grad_norm_ / clip_grad_value_ / get_total_norm (the
last is what accelerate's clip_grad_norm_ calls on torch >= 2.6), and after a closure
passed to step() returns (the closure runs the backward inside step).
GradScaler.step marks the step also when it skips optimizer.step (inf/NaN).

Never breaks the job: without the library or its symbols, one warning line
and the job runs unchanged.
"""
import ccshim_ddpsync
import ccshim_imports
import ccshim_lib
import os
import sys
import types
import weakref

__all__ = ["install", "step_mark_function", "before_step", "repair"]

CCSHIM_COMPLETE_REDUCE = ccshim_lib.CCSHIM_COMPLETE_REDUCE
CCSHIM_COMPLETE_BY_CALLER = ccshim_lib.CCSHIM_COMPLETE_BY_CALLER

_installed = False
_optimizers = weakref.WeakSet()  # every optimizer seen
_constructed = weakref.WeakSet()  # every optimizer made (or copied)
_ddps = weakref.WeakSet()  # every DistributedDataParallel model seen
_stepped = weakref.WeakSet()  # optimizers that stepped since the last mark
_marked = False  # a step was marked by this helper
_pre_hooks = 0  # before_step calls
_repairs = 0
_functions = ccshim_lib.functions  # the preloaded libccshim's functions by name ({} when absent)
_coalescing = ccshim_lib.coalescing


def _warn(msg, once=None):
    ccshim_lib.warn("ccshim_torch", msg, once)


def step_mark_function():
    """ccshim_step_mark of the preloaded libccshim, or None when absent."""
    return _functions().get("ccshim_step_mark")


def _ddp_params(only_unreached=False, but=()):
    """(process group, [parameters]) of every DDP model seen, in a fixed
    order; with ONLY_UNREACHED, only the models whose .grad coalescing can
    leave local without anything pending (_unreached), less those in BUT
    (their gradients were averaged already)."""
    out = []
    for ddp in list(_ddps):
        try:
            if only_unreached and (not _unreached(ddp) or any(ddp is m for m in but)):
                continue
            ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
            params = []
            for name, p in ddp.module.named_parameters():
                if p.requires_grad and name not in ignore:
                    params.append(p)
            out.append((getattr(ddp, "process_group", None), params))
        except Exception as e:  # a model being torn down
            _warn("cannot list the parameters of a DDP model: %r" % (e,), once="ddp-params")
    return out


def _unreached(ddp):
    """DDP with find_unused_parameters=True and gradients copied out of the
    buckets: a parameter that is unused in a backward pass (globally) does
    not get the bucket's reduced value copied into its .grad.  When an
    earlier pass that used it was answered locally, its .grad keeps that
    rank's local sum although the bucket's last reduction was real and
    nothing is pending.  Its gradients are averaged before every step --
    except in a step DDP itself synchronised once (ccshim_ddpsync): then
    DDP kept its own record of the parameters used in the unsynchronised
    passes, as under no_sync(), and its one reduction is exact."""
    return bool(getattr(ddp, "find_unused_parameters", False)) and \
        not bool(getattr(ddp, "gradient_as_bucket_view", False)) and \
        not ccshim_ddpsync.reduced_by_ddp(ddp)


class _CollectiveFailed(Exception):
    """The repair's all-reduce failed (the job's process group timed out)."""


_recent_buffers = []
_averaged_values = [0, 0]  # values and bytes _average_grads all-reduced, since the caller reset it
# (step, backward passes, collectives since the step mark) right after the
# unused parameters' averaging: the same again means no backward pass since,
# and the gradients are averaged already (clip_grad_norm_, then the
# optimizer step, both read them).
_unreached_done = None


def _foreign_wait(group, world):
    """When GROUP's backend is one ccshim does not intercept (gloo): says
    (ccshim_foreign_begin) that this rank waits in the helper's own
    all-reduce, and returns ccshim_foreign_end; else None."""
    begin, end = ccshim_lib.function("ccshim_foreign_begin"), ccshim_lib.function("ccshim_foreign_end")
    if begin is None or end is None:
        return None
    try:
        import torch.distributed as dist
        name = uncovered_backend(dist.get_backend(group))
    except Exception:
        return None
    if name is None:
        return None
    begin(("torch.distributed.all_reduce (%s): ccshim_torch averaging the gradients" % name)
          .encode("ascii", "replace"), world)
    return end


def _average_grads(group, params):
    """Averages the floating-point .grad of PARAMS over GROUP; returns how many."""
    import torch
    import torch.distributed as dist
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    world = dist.get_world_size(group)
    by_kind = {}
    seen = set()
    for p in params:
        g = p.grad
        if g is None or id(p) in seen or not g.is_floating_point() or g.is_sparse:
            continue
        seen.add(id(p))
        by_kind.setdefault((g.dtype, g.device), []).append(g)
    n = 0
    for key in sorted(by_kind, key=str):  # the same order on every rank
        grads = by_kind[key]
        flat = _flatten_dense_tensors(grads)
        _averaged_values[0] += flat.numel()
        _averaged_values[1] += flat.numel() * flat.element_size()
        # Issued async, so ccshim_sites does not name it: the wait is named
        # here, so that a rank left in it is not taken for one computing.
        end = _foreign_wait(group, world)
        try:
            work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group, async_op=True)
            work.wait()
        except RuntimeError as e:  # a timeout: another rank is not repairing
            raise _CollectiveFailed(e)
        finally:
            if end is not None:
                end()
        flat.div_(world)
        # Keep the flat buffer and the work referenced from Python until a
        # later repair: gloo's worker may drop its own references after the
        # all-reduce completed, and a tensor or work freed last on that
        # thread takes the GIL in its destructor, which deadlocks against the
        # interpreter's shutdown (the main thread destroys the process group
        # holding the GIL: seen on torch 1.13, and on torch 2.13 about once
        # in five runs of a GradScaler job while only the tensor was kept).
        _recent_buffers.append((flat, work))
        del _recent_buffers[:-4]
        with torch.no_grad():
            for g, v in zip(grads, _unflatten_dense_tensors(flat, grads)):
                g.copy_(v)
        n += len(grads)
    return n, world


def _repair_skipped(lib, step, where):
    """DDP models whose last backward of the step skipped its
    synchronisation (ccshim_ddpsync): their .grad holds this rank's sums.
    The ranks agree that they ended the step alike, then the gradients are
    averaged (the synchronised value) and the models go back to ccshim's
    all-reduce-level coalescing."""
    models = ccshim_ddpsync.unreduced(list(_ddps))
    if not models:
        return models
    units = ccshim_ddpsync.units()
    # A model's first, announced step: its ranks compare their counts over
    # its process group (ccshim has seen no reduction of theirs to compare on).
    refused, compared = ccshim_ddpsync.first_step_checked(models)
    if refused is not None:
        _warn("error: step %d: DDP's gradients are not synchronised before %s: %s (see the DESYNC line)"
              % (step, where, refused))
        raise RuntimeError("ccshim: step %d: the ranks made different numbers of backward passes in this "
                           "step (desynchronised, see the DESYNC line); this rank's gradients were not "
                           "synchronised, so the optimizer step cannot run" % step)
    boundary = lib.get("ccshim_step_boundary")
    if not compared and boundary is not None and boundary(units) != 0:
        _warn("error: step %d: DDP's gradients are not synchronised before %s (the step ended after %d "
              "backward pass(es), not the agreed number) and the ranks did not end the step alike (see "
              "ccshim's DESYNC)" % (step, where, units))
        raise RuntimeError("ccshim: step %d: the ranks made different numbers of backward passes in this "
                           "step (desynchronised, see the DESYNC line); this rank's gradients were not "
                           "synchronised, so the optimizer step cannot run" % step)
    count = 0
    world = 1
    for ddp in models:
        group = getattr(ddp, "process_group", None)
        params = [p for n, p in ddp.module.named_parameters()
                  if p.requires_grad and n not in set(getattr(ddp, "parameters_to_ignore", ()) or ())]
        try:
            k, world = _average_grads(group, params)
        except _CollectiveFailed as e:
            raise e.args[0]
        count += k
    ccshim_ddpsync.repaired(models, "step %d ended after %d backward pass(es)" % (step, units))
    _warn("step %d: DDP skipped the synchronisation of the step's last backward pass before %s: "
          "averaged the gradients of %d parameter(s) over %d rank(s)" % (step, where, count, world))
    return models


def repair(where="the optimizer step"):
    """Completes deferred all-reduces still pending on this rank (a no-op
    when none).  Collective when something is pending: every rank calls it
    at the same point, which holds since every rank has the same pending."""
    global _repairs
    lib = _functions()
    pending = lib.get("ccshim_coalesce_pending")
    complete = lib.get("ccshim_coalesce_complete")
    if pending is None or complete is None:
        return 0
    step = lib["ccshim_step_current"]() if "ccshim_step_current" in lib else 0
    averaged = _repair_skipped(lib, step, where)
    n = pending()
    if n == 0:
        unreached = _ddp_params(only_unreached=True, but=averaged) if _coalescing() else []
        if unreached:
            return _average_unreached(lib, step, where, unreached)
        return 0
    return _repair_pending(lib, step, where, n, complete)


def _average_unreached(lib, step, where, unreached):
    """Averages the gradients of DDP models whose unused parameters DDP does
    not copy the reduced bucket into (_unreached), once per step: not again
    when nothing was issued since (clip_grad_norm_ and then the optimizer
    step both repair), and only after the ranks agreed that they ended the
    step alike (ccshim_step_boundary, as the other repairs do), so that a
    desynchronised rank is a DESYNC, not a rank waiting forever in this
    all-reduce."""
    global _unreached_done
    collectives = lib.get("ccshim_step_collectives")
    units = ccshim_ddpsync.units()
    if _unreached_done is not None and collectives is not None and \
            _unreached_done == (step, units, collectives()):
        return 0
    boundary = lib.get("ccshim_step_boundary")
    if boundary is not None and boundary(units) != 0:
        _warn("error: step %d: the gradients of a DDP model with find_unused_parameters=True are not averaged "
              "before %s: the ranks did not end the step alike (see ccshim's DESYNC)" % (step, where))
        raise RuntimeError("ccshim: step %d: the ranks did not end this step alike (desynchronised, see the "
                           "DESYNC line); this rank's gradients were not averaged, so the optimizer step "
                           "cannot run" % step)
    try:
        _averaged_values[:] = [0, 0]
        count = 0
        for group, ps in unreached:
            count += _average_grads(group, ps)[0]
    except _CollectiveFailed as e:
        _warn("error: step %d: the all-reduce averaging the gradients of a DDP model with "
              "find_unused_parameters=True failed (%s): the ranks are not at the same point"
              % (step, e.args[0]))
        raise e.args[0]
    except Exception as e:
        _warn("step %d: could not average the gradients of a DDP model with "
              "find_unused_parameters=True: %r" % (step, e))
        return -1
    if collectives is not None:
        _unreached_done = (step, units, collectives())
    _warn("DistributedDataParallel with find_unused_parameters=True and "
          "gradient_as_bucket_view=False under coalescing: DDP does not copy a reduced "
          "bucket into the .grad of a parameter unused in that backward pass, so the "
          "gradients of such a model (%d parameter(s)) are averaged once in every "
          "step that ccshim coalesces itself, before the first of clip_grad_norm_, "
          "GradScaler and the optimizer step reads them: one extra all-reduce of %d values "
          "(%.3f MB) per step, after the ranks agreed they ended the step alike "
          "(gradient_as_bucket_view=True avoids it; not once DDP synchronises once per "
          "step, on torch >= %d.%d)"
          % ((count, _averaged_values[0], _averaged_values[1] / 1e6) + ccshim_ddpsync.UNUSED_MAP_KEPT_SINCE),
          once="unreached")
    return 0


def _repair_pending(lib, step, where, n, complete):
    """repair() with N deferred all-reduces pending (COMPLETE: ccshim_coalesce_complete)."""
    global _repairs
    # Every rank ended the step alike before any collective repair: a rank
    # that skipped (or added) a mini-batch is a DESYNC, and the repair's
    # all-reduce would wait forever for ranks that are elsewhere.
    boundary = lib.get("ccshim_coalesce_boundary")
    if boundary is not None and boundary() != 0:
        _warn("error: step %d: %d deferred all-reduce(s) pending before %s and the ranks did not "
              "end the step alike (see ccshim's DESYNC): the gradients are not reduced and no "
              "optimizer step may read them" % (step, n, where))
        raise RuntimeError("ccshim: step %d: the ranks made different numbers of gradient "
                           "all-reduces in this step (desynchronised, see the DESYNC line); "
                           "this rank's gradients were left unreduced by coalescing, so the "
                           "optimizer step cannot run" % step)
    ddps = _ddp_params()
    if not ddps:
        done = complete(CCSHIM_COMPLETE_REDUCE)
        _warn("step %d: %d deferred all-reduce(s) pending before %s; ccshim reduced its buffers "
              "(no DistributedDataParallel model seen)%s"
              % (step, n, where, "" if done >= 0 else ": FAILED, see ccshim's log"))
        return done
    try:
        params = 0
        world = 1
        for group, ps in ddps:
            k, world = _average_grads(group, ps)
            params += k
    except _CollectiveFailed as e:
        # Every rank with pending reductions repairs; a rank that is
        # somewhere else (it issued a different number of backward passes:
        # desynchronised) leaves this all-reduce waiting until the process
        # group's timeout.  The job cannot go on: raise torch's error.
        _warn("error: step %d: %d deferred all-reduce(s) pending before %s and the all-reduce "
              "averaging the gradients failed (%s): the ranks are not at the same point; ranks "
              "that issued a different number of backward passes in this step are desynchronised"
              % (step, n, where, e.args[0]))
        raise e.args[0]
    except Exception as e:
        # ccshim's step marker then reports the pending calls (and ends the
        # job or switches coalescing off, as CCSHIM_ON_DESYNC says).
        _warn("step %d: %d deferred all-reduce(s) pending before %s and the gradients could not be "
              "averaged: %r" % (step, n, where, e))
        return -1
    done = complete(CCSHIM_COMPLETE_BY_CALLER)
    _repairs += 1
    _warn("step %d: %d deferred all-reduce(s) pending before %s: averaged the gradients of %d "
          "parameter(s) over %d rank(s)" % (step, n, where, params, world))
    return done


def before_step(optimizer):
    """Runs before OPTIMIZER's step: marks one step per iteration, repairs first."""
    global _marked, _stepped, _pre_hooks
    _pre_hooks += 1
    lib = _functions()
    mark = lib.get("ccshim_step_mark")
    if mark is None:
        return
    _optimizers.add(optimizer)
    collectives = lib.get("ccshim_step_collectives")
    issued = collectives() if collectives is not None else 1
    if _marked and issued == 0 and optimizer not in _stepped:
        _stepped.add(optimizer)  # another optimizer of the iteration already marked
        return
    repair()
    if _coalescing():
        ccshim_ddpsync.first_step_seen(list(_ddps))
    mark()
    _marked = True
    _stepped = weakref.WeakSet([optimizer])
    if _coalescing():
        ccshim_ddpsync.step_ended(list(_ddps))


def _repairing_closure(closure):
    """CLOSURE (which runs the backward inside step) followed by a repair."""
    if closure is None or getattr(closure, "_ccshim_repairs", False):
        return closure

    def run(*a, **kw):
        r = closure(*a, **kw)
        repair("the optimizer step (after its closure)")
        return r

    run._ccshim_repairs = True
    return run


def _with_closure(args, kwargs):
    """ARGS, KWARGS of step() with the closure, if any, made to repair."""
    if "closure" in kwargs and kwargs["closure"] is not None:
        kwargs = dict(kwargs)
        kwargs["closure"] = _repairing_closure(kwargs["closure"])
    elif args and callable(args[0]):
        args = (_repairing_closure(args[0]),) + tuple(args[1:])
    return args, kwargs


def _global_pre_hook(optimizer, args, kwargs):
    before_step(optimizer)
    # torch >= 2.0 hands the hook step's own arguments, the optimizer first
    # (step(closure) -> args == (optimizer, closure)): the closure is args[1].
    lead, rest = ((args[0],), args[1:]) if args and args[0] is optimizer else ((), args)
    new_rest, new_kwargs = _with_closure(rest, kwargs)
    if new_rest is not rest or new_kwargs is not kwargs:
        return lead + tuple(new_rest), new_kwargs
    return None


def _wrap_instance(opt):
    """torch < 2.0: OPT.step becomes a bound method that runs before_step
    first (torch 1.13's lr schedulers read optimizer.step.__self__ and
    __func__, and wrap it themselves)."""
    if "_ccshim_step" in opt.__dict__:
        return
    own = opt.__dict__.get("step")  # rare: an instance's own step

    def step(self, *args, **kwargs):
        before_step(self)
        args, kwargs = _with_closure(args, kwargs)
        if own is not None:
            return own(*args, **kwargs)
        return type(self).step(self, *args, **kwargs)  # the class's (profiler-wrapped) step

    opt.__dict__["_ccshim_step"] = True
    opt.step = types.MethodType(step, opt)


def _hook_optimizers(optmod):
    """Makes every optimizer step of torch.optim.optimizer OPTMOD mark a step."""
    if step_mark_function() is None:
        _warn("libccshim is not preloaded (run under ccshim-run); optimizer steps are not marked",
              once="no-lib")
        return
    if "ccshim_coalesce_pending" not in _functions():
        _warn("this libccshim has no ccshim_coalesce_pending; optimizer steps are marked but "
              "deferred all-reduces are not repaired", once="no-repair")
    register = getattr(optmod, "register_optimizer_step_pre_hook", None)
    if register is not None:
        register(_global_pre_hook)
    base = optmod.Optimizer
    if getattr(base, "_ccshim_wrapped", False):
        return
    orig_init = base.__init__
    orig_setstate = getattr(base, "__setstate__", None)
    wrap_step = register is None

    # Every optimizer is remembered (ccshim_ddpsync skips from a model's
    # first step only when one steps its parameters: the steps are marked);
    # before torch 2.0 its step is wrapped as well.
    def remember(opt):
        try:
            _constructed.add(opt)
        except TypeError:  # a subclass without weak references: not announced
            pass
        # Its steps will be marked: a rank still in step 0 is in a step,
        # not one that never marks them (desync's out-of-step rule).
        marking = _functions().get("ccshim_step_marking")
        if marking is not None:
            marking()

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        remember(self)
        if wrap_step:
            try:
                _wrap_instance(self)
            except Exception as e:
                _warn("could not wrap an optimizer's step: %r" % (e,), once="wrap")

    base.__init__ = __init__
    if orig_setstate is not None:
        # copy.deepcopy and unpickling build an optimizer through __setstate__,
        # not __init__ (and __getstate__ leaves the wrapper out).
        def __setstate__(self, state):
            orig_setstate(self, state)
            remember(self)
            if not wrap_step:
                return
            try:
                self.__dict__.pop("_ccshim_step", None)
                self.__dict__.pop("step", None)
                _wrap_instance(self)
            except Exception as e:
                _warn("could not wrap an optimizer's step: %r" % (e,), once="wrap")

        base.__setstate__ = __setstate__
    base._ccshim_wrapped = True


def _calling_caller(fn, args, kwargs):
    """FN(*ARGS, **KWARGS) for the wrapper that called this: the warnings it
    raises that point at that wrapper (torch's own stacklevel=2 FutureWarning
    in DistributedDataParallel's constructor) are issued again at the line
    that called the wrapper, under the filters in force, so the user sees
    their own line, not ccshim_torch.py's.  Warnings pointing elsewhere are
    issued again unchanged."""
    import warnings
    caller = sys._getframe(2)
    caught = []
    try:
        with warnings.catch_warnings(record=True) as c:
            # everything recorded here; the job's filters apply when they
            # are issued again below (also when FN raises)
            warnings.simplefilter("always")
            caught = c
            return fn(*args, **kwargs)
    finally:
        for w in caught:
            if os.path.abspath(w.filename) == _THIS_FILE:
                g = caller.f_globals
                warnings.warn_explicit(w.message, w.category, caller.f_code.co_filename, caller.f_lineno,
                                       module=g.get("__name__"), registry=g.setdefault("__warningregistry__", {}),
                                       module_globals=g)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


_THIS_FILE = os.path.abspath(__file__)


def _hook_ddp(mod):
    """Remembers every DistributedDataParallel model (its gradients are
    repaired) and, under coalescing, gives it ccshim_ddpsync's forward: on
    the instance, at construction (the class's __init__ is the one place
    every model passes through; its forward is left as it is)."""
    cls = getattr(mod, "DistributedDataParallel", None)
    if cls is None or getattr(cls, "_ccshim_wrapped", False):
        return
    orig_init = cls.__init__
    skip = _coalescing() and ccshim_ddpsync.enabled() and "ccshim_coalesce_helper" in _functions() and \
        ccshim_ddpsync.setup(cls, lambda: list(_constructed))

    def __init__(self, *args, **kwargs):
        _calling_caller(orig_init, (self,) + args, kwargs)
        _ddps.add(self)
        if skip:
            try:
                ccshim_ddpsync.attach(self)
            except Exception as e:  # never break the job's model
                _warn("could not attach the DDP helper to a model: %r" % (e,), once="ddpsync-attach")

    cls.__init__ = __init__
    cls._ccshim_wrapped = True


def _hook_scaler(mod):
    """GradScaler.unscale_ reads the gradients (scaler.step calls it before
    optimizer.step): repair first.  GradScaler.step marks the step even when
    it skips optimizer.step."""
    cls = getattr(mod, "GradScaler", None)
    if cls is None or "_ccshim_wrapped" in cls.__dict__:
        return
    if "unscale_" in cls.__dict__:
        orig_unscale = cls.__dict__["unscale_"]

        def unscale_(self, optimizer, *a, **kw):
            repair("GradScaler.unscale_")
            return orig_unscale(self, optimizer, *a, **kw)

        cls.unscale_ = unscale_
    if "step" in cls.__dict__:
        orig_step = cls.__dict__["step"]

        def step(self, optimizer, *a, **kw):
            if not self.is_enabled():
                return orig_step(self, optimizer, *a, **kw)
            repair("GradScaler.step")
            before = _pre_hooks
            r = orig_step(self, optimizer, *a, **kw)
            if _pre_hooks == before:  # optimizer.step skipped
                before_step(optimizer)
            return r

        cls.step = step
    cls._ccshim_wrapped = True


def _hook_clip(mod):
    """clip_grad_norm_ and clip_grad_value_ read the gradients: repair first.
    Also torch.nn.utils.get_total_norm (torch >= 2.6), which accelerate's
    clip_grad_norm_ calls instead of clip_grad_norm_ (hooked on the package,
    so that clip_grad_norm_'s own call to it does not repair twice)."""
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "get_total_norm"):
        fn = getattr(mod, name, None)
        if fn is None or getattr(fn, "_ccshim_wrapped", False):
            continue

        def make(fn, name):
            def clip(*a, **kw):
                repair(name)
                return fn(*a, **kw)

            clip._ccshim_wrapped = True
            clip.__name__ = fn.__name__
            clip.__doc__ = fn.__doc__
            return clip

        setattr(mod, name, make(fn, name))


# torch.distributed backends whose collectives reach ccshim: NCCL's, and
# MPI's (torch's mpi backend calls MPI).  gloo is compiled into libtorch.
COVERED_BACKENDS = ("nccl", "mpi")


def uncovered_backend(backend):
    """The first backend named in BACKEND (torch.distributed.get_backend():
    "gloo", "nccl", "cpu:gloo,cuda:nccl") when none of them is one ccshim
    intercepts, else None (a CUDA job's tensors go through its nccl)."""
    names = [part.split(":")[-1].strip().lower() for part in str(backend).split(",")]
    names = [n for n in names if n]
    if not names or any(n in COVERED_BACKENDS for n in names):
        return None
    return names[0]


def _note_backend(c10d):
    """After the job's init_process_group: tells ccshim when the default
    process group's backend is one it does not intercept (the trace records
    it, and rank 0 says it at exit with what ccshim covers)."""
    fn = _functions().get("ccshim_uncovered")
    if fn is None:
        return
    try:
        name = uncovered_backend(c10d.get_backend())
    except Exception:  # no default group after all: nothing to say
        return
    if name is not None:
        fn(name.encode("ascii", "replace"))


def _hook_c10d(mod):
    """torch.distributed.distributed_c10d: init_process_group notes its
    backend (torch.distributed re-exports the wrapper: this runs before
    its `from .distributed_c10d import *`)."""
    orig = getattr(mod, "init_process_group", None)
    if orig is None or getattr(orig, "_ccshim_wrapped", False):
        return
    import functools

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        r = orig(*args, **kwargs)
        try:
            _note_backend(mod)
        except Exception as e:  # never break the job's set-up
            _warn("could not name the process group's backend: %r" % (e,), once="backend")
        return r

    init_process_group._ccshim_wrapped = True
    mod.init_process_group = init_process_group


_HOOKS = {
    "torch.distributed.distributed_c10d": _hook_c10d,
    "torch.optim.optimizer": _hook_optimizers,
    "torch.nn.parallel.distributed": _hook_ddp,
    "torch.cuda.amp.grad_scaler": _hook_scaler,
    "torch.amp.grad_scaler": _hook_scaler,
    "torch.nn.utils.clip_grad": _hook_clip,
    "torch.nn.utils": _hook_clip,
}


def install():
    """Hooks torch now where it is imported, the rest when imported."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, hook in _HOOKS.items():
        ccshim_imports.when_imported(name, hook, lambda n, e: _warn("could not hook %s: %r" % (n, e)))
