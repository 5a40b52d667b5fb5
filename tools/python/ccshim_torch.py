"""ccshim_torch - marks every PyTorch optimizer step for ccshim.

`ccshim-run --torch -- python train.py` puts this directory first on
PYTHONPATH; its sitecustomize.py calls install(), which waits for
torch.optim.optimizer to be imported by the job and then registers one
global optimizer-step pre-hook that calls ccshim_step_mark() in the
preloaded libccshim.  No change to the job.  A step marker makes ccshim's
counts per step, desync checks per step and CCSHIM_COALESCE=auto work.

The pre-hook runs after the backward passes (every gradient reduction of
the step is complete) and before the optimizer reads the gradients, which is
where coalescing verifies that no deferred reduction is left.

torch without register_optimizer_step_pre_hook (before 2.0): every
Optimizer's step is wrapped when the optimizer is constructed instead.
"""
import ctypes
import importlib.abc
import sys

__all__ = ["install", "step_mark_function"]

_installed = False
_mark = None
_HOOKED_MODULE = "torch.optim.optimizer"


def _warn(msg):
    sys.stderr.write("ccshim_torch: %s\n" % msg)


def step_mark_function():
    """ccshim_step_mark of the preloaded libccshim, or None when absent."""
    global _mark
    if _mark is None:
        try:
            fn = ctypes.CDLL(None).ccshim_step_mark
        except (AttributeError, OSError):
            return None
        fn.restype = ctypes.c_uint64
        fn.argtypes = []
        _mark = fn
    return _mark


def _hook_optimizers(optmod):
    """Makes every optimizer step of torch.optim.optimizer OPTMOD mark a step."""
    mark = step_mark_function()
    if mark is None:
        _warn("libccshim is not preloaded (run under ccshim-run); optimizer steps are not marked")
        return
    register = getattr(optmod, "register_optimizer_step_pre_hook", None)
    if register is not None:
        register(lambda optimizer, args, kwargs: mark())
        return
    # Older torch: wrap each optimizer's step method as it is constructed.
    base = optmod.Optimizer
    if getattr(base, "_ccshim_wrapped", False):
        return
    orig_init = base.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        step = self.step

        def marked_step(*a, **kw):
            mark()
            return step(*a, **kw)

        self.step = marked_step

    base.__init__ = __init__
    base._ccshim_wrapped = True


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then hooks the optimizers."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        try:
            _hook_optimizers(module)
        except Exception as e:  # never break the job's import
            _warn("could not hook optimizer steps: %r" % (e,))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds torch.optim.optimizer with the other finders, wraps its loader."""

    def find_spec(self, name, path, target=None):
        if name != _HOOKED_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install():
    """Hooks optimizer steps now if torch.optim is imported, else on import."""
    global _installed
    if _installed:
        return
    _installed = True
    mod = sys.modules.get(_HOOKED_MODULE)
    if mod is not None:
        _hook_optimizers(mod)
    else:
        sys.meta_path.insert(0, _Finder())
