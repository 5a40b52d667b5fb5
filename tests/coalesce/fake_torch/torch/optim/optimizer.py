"""torch.optim.optimizer as far as ccshim_torch uses it: the global step
pre-hooks (torch >= 2.0) run before every optimizer's step.  With
FAKE_TORCH_OLD=1 the registration function is absent, as before torch 2.0."""
import functools
import os

_global_optimizer_pre_hooks = []


class _Handle:
    def __init__(self, hook):
        self._hook = hook

    def remove(self):
        _global_optimizer_pre_hooks.remove(self._hook)


if os.environ.get("FAKE_TORCH_OLD") != "1":

    def register_optimizer_step_pre_hook(hook):
        _global_optimizer_pre_hooks.append(hook)
        return _Handle(hook)


def _with_hooks(step):
    """What torch's Optimizer does around every subclass's step."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in list(_global_optimizer_pre_hooks):
            hook(self, args, kwargs)
        return step(self, *args, **kwargs)

    return wrapper


class Optimizer:
    def __init__(self, params, defaults):
        self.params = list(params)
        self.defaults = defaults

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])
