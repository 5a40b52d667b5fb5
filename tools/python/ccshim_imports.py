"""ccshim_imports - runs ccshim's hooks on a module once the job imports it.

Shared by ccshim_torch (optimizer steps) and ccshim_sites (Python call
sites): one finder first on sys.meta_path finds a hooked module with the
other finders and wraps its loader, so the hooks run right after the module
itself has run; a module already imported is hooked at once.  A hook that
fails never breaks the job's import: its WARN says so.
"""
import importlib.abc
import sys

__all__ = ["when_imported"]

_hooks = {}  # module name -> [(hook, warn)]
_finder = None


def _run(hook, warn, name, module):
    try:
        hook(module)
    except Exception as e:  # never break the job's import
        warn(name, e)


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the hooks of the module."""

    def __init__(self, real, name):
        self._real = real
        self._name = name

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        for hook, warn in _hooks.get(self._name, ()):
            _run(hook, warn, self._name, module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the hooked modules with the other finders, wraps their loaders."""

    def find_spec(self, name, path, target=None):
        if name not in _hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


def when_imported(name, hook, warn):
    """Runs HOOK(module) on module NAME now if it is imported, else when it
    is; WARN(name, exception) when the hook fails."""
    global _finder
    _hooks.setdefault(name, []).append((hook, warn))
    mod = sys.modules.get(name)
    if mod is not None:
        _run(hook, warn, name, mod)
    if _finder is None:
        _finder = _Finder()
        sys.meta_path.insert(0, _finder)
