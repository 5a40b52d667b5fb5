"""ccshim_lib - what the Python helpers of `ccshim-run --torch` share: the
preloaded libccshim's functions (one ctypes loader), the settings they read,
this process's rank and their log lines.

ccshim_torch, ccshim_ddpsync and ccshim_sites import this module; it imports
none of them (nor torch, which it only looks up in sys.modules), so there is
no import circle.  Nothing here fails: without the library (not run under
ccshim-run) functions() is {} and every helper leaves the job as it is.
"""
import ctypes
import os
import sys

__all__ = ["functions", "function", "rank", "warn", "coalescing", "setting_on",
           "CCSHIM_COMPLETE_REDUCE", "CCSHIM_COMPLETE_BY_CALLER"]

# ccshim_coalesce_complete's HOW (include/ccshim.h)
CCSHIM_COMPLETE_REDUCE = 0
CCSHIM_COMPLETE_BY_CALLER = 1

_u32, _u64, _i64, _int, _ptr, _str = (ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int,
                                      ctypes.c_void_p, ctypes.c_char_p)
# (name, result, arguments) of every function a helper calls (include/ccshim.h)
_SIGNATURES = (
    ("ccshim_step_mark", _u64, []),
    ("ccshim_step_current", _u64, []),
    ("ccshim_step_marking", None, []),
    ("ccshim_step_collectives", _u64, []),
    ("ccshim_coalesce_pending", _u64, []),
    ("ccshim_coalesce_complete", _i64, [_int]),
    ("ccshim_coalesce_boundary", _int, []),
    ("ccshim_coalesce_period", _u32, []),
    ("ccshim_coalesce_helper", _int, [_int]),
    ("ccshim_coalesce_helper_skipped", None, [_u32]),
    ("ccshim_step_units_word", _ptr, []),
    ("ccshim_step_boundary", _int, [_u32]),
    ("ccshim_coalesce_step_calls", _u64, []),
    ("ccshim_verdict", _int, [_str, _str]),
    ("ccshim_uncovered", _int, [_str]),
    ("ccshim_annotate", _u32, [_str]),
    ("ccshim_annotate_word", _ptr, []),
    ("ccshim_foreign_begin", None, [_str, _int]),
    ("ccshim_foreign_call", None, [_str, _u64, _int, _int, _u64, _str, _str]),
    ("ccshim_foreign_issued", None, [_u64, _int, _int, _str]),
    ("ccshim_foreign_end", None, []),
)

_lib = None  # name -> ctypes function of the preloaded libccshim ({} when absent)
_warned = set()


def functions():
    """The preloaded libccshim's functions by name, their types set ({}
    when it is not preloaded; a function this library lacks is left out)."""
    global _lib
    if _lib is None:
        lib = {}
        try:
            handle = ctypes.CDLL(None)
        except OSError:
            handle = None
        for name, res, args in _SIGNATURES:
            try:
                fn = getattr(handle, name)
            except (AttributeError, TypeError):
                continue
            fn.restype = res
            fn.argtypes = args
            lib[name] = fn
        _lib = lib
    return _lib


def function(name):
    """The function NAME of the preloaded libccshim, or None."""
    return functions().get(name)


def rank():
    """This process's rank for log lines ('?' when unknown): torch.distributed's
    once its process group is up, else the launcher's."""
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return str(dist.get_rank())
    except Exception:
        pass
    for v in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(v):
            return os.environ[v]
    return "?"


def warn(who, msg, once=None):
    """One line "WHO[RANK]: MSG" on stderr; with ONCE, only the first time
    that key is given."""
    if once is not None:
        if once in _warned:
            return
        _warned.add(once)
    sys.stderr.write("%s[%s]: %s\n" % (who, rank(), msg))
    sys.stderr.flush()


def coalescing():
    """CCSHIM_COALESCE of this process is on (every:N or auto)."""
    return os.environ.get("CCSHIM_COALESCE", "off").strip() not in ("", "off")


def setting_on(name):
    """The boolean setting NAME, on by default (0/no/off/false turn it off)."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "no", "off", "false")
