"""Loaded by Python at start-up when `ccshim-run --torch` or `--python` put
this directory on PYTHONPATH: names the Python line behind each collective
(ccshim_sites.py) and, except under --python alone (which sets
CCSHIM_TORCH_HELPER=0), makes every torch.optim optimizer step call
ccshim_step_mark (see ccshim_torch.py); then runs the sitecustomize this one
shadows, if any."""
import os
import sys


def _ccshim_start():
    try:
        if os.environ.get("CCSHIM_TORCH_HELPER") != "0":
            import ccshim_torch
            ccshim_torch.install()
    except Exception as e:  # never break the job's start-up
        sys.stderr.write("ccshim_torch: not installed: %r\n" % (e,))
    try:  # the Python line behind each collective (docs/python-sites.md)
        import ccshim_sites
        ccshim_sites.install()
    except Exception as e:
        sys.stderr.write("ccshim_sites: not installed: %r\n" % (e,))
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        if not d or os.path.abspath(d) == here:
            continue
        other = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(other):
            with open(other) as f:
                code = compile(f.read(), other, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": other})
            break


_ccshim_start()
del _ccshim_start
