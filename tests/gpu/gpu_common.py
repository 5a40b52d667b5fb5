"""Shared by the GPU checks' Python scripts (docs/gpu-validation.md).

Importable without torch: the result files are plain (JSON + raw float32
arrays), so comparing two runs and counting collectives from ccshim traces
needs only the standard library.  The command line offers both for
tests/gpu/run-device-checks.sh:

  python3 gpu_common.py compare RUN_A RUN_B        # losses, gradients, parameters
  python3 gpu_common.py counts AUDIT TRACE_DIR FIRST_STEP   # per-step allreduce counts (JSON)

A run directory holds meta.json ({"losses": [...], ...}), grads.bin (the
flattened gradient after each step's backward passes, step after step) and
params.bin (the final parameters), both little-endian float32.
"""
import array
import json
import math
import os
import subprocess
import sys


def save_run(outdir, meta, grads, params):
    """Writes a run: META (dict), GRADS (list of per-step lists or float32
    tensors flattened by the caller to bytes) and PARAMS (bytes)."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "grads.bin"), "wb") as f:
        for g in grads:
            f.write(g)
    with open(os.path.join(outdir, "params.bin"), "wb") as f:
        f.write(params)
    with open(os.path.join(outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def nccl_version(torch):
    """PyTorch's NCCL version as a string (a tuple in torch 2, an int before)."""
    v = torch.cuda.nccl.version()
    if isinstance(v, int):
        return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else \
            "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
    return ".".join(map(str, v))


def _floats(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _diff(a, b):
    """(bitwise equal, max |a-b|, max |a-b| / max |b|) of two float arrays."""
    if len(a) != len(b):
        return False, math.inf, math.inf
    num = den = 0.0
    for x, y in zip(a, b):
        d = abs(x - y)
        if d > num or d != d:
            num = d if d == d else math.inf
        if abs(y) > den:
            den = abs(y)
    return a.tobytes() == b.tobytes(), num, (num / den if den else (0.0 if num == 0 else math.inf))


def compare(run_a, run_b):
    """Compares two run directories; returns a dict of the differences."""
    with open(os.path.join(run_a, "meta.json")) as f:
        ma = json.load(f)
    with open(os.path.join(run_b, "meta.json")) as f:
        mb = json.load(f)
    la, lb = ma["losses"], mb["losses"]
    loss_diff = max((abs(x - y) for x, y in zip(la, lb)), default=math.inf) if len(la) == len(lb) else math.inf
    g_eq, g_abs, g_rel = _diff(_floats(os.path.join(run_a, "grads.bin")), _floats(os.path.join(run_b, "grads.bin")))
    p_eq, p_abs, p_rel = _diff(_floats(os.path.join(run_a, "params.bin")), _floats(os.path.join(run_b, "params.bin")))
    return {"losses_equal": la == lb, "loss_max_abs_diff": loss_diff,
            "grads_bitwise_equal": g_eq, "grad_max_abs_diff": g_abs, "grad_max_rel_diff": g_rel,
            "params_bitwise_equal": p_eq, "param_max_abs_diff": p_abs, "param_max_rel_diff": p_rel}


def counts(audit, trace_dir, first_step=0):
    """Per step from FIRST_STEP on: real and deferred allreduce calls of rank 0,
    from `ccshim-audit --tsv` (step rank comm kind count bytes deferred time_ns)."""
    out = subprocess.run([audit, "--tsv", trace_dir], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    steps = {}
    for line in out.splitlines():
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        step, rank, kind, n, deferred = int(f[0]), int(f[1]), f[3], int(f[4]), f[6] not in ("0", "")
        if rank != 0 or step < first_step or kind != "allreduce":
            continue
        s = steps.setdefault(step, {"real": 0, "deferred": 0})
        s["deferred" if deferred else "real"] += n
    return {str(k): steps[k] for k in sorted(steps)}


def per_buffer_max(audit, trace_dir, most):
    """Largest number of real allreduce calls on one buffer in one step, found
    with ccshim-audit's own --expect rule (exit 1 when exceeded): the
    smallest K <= MOST with allreduce<=K/buffer passing, or None."""
    for k in range(0, most + 1):
        rc = subprocess.run([audit, "--no-symbols", "--expect", "allreduce<=%d/buffer" % k, trace_dir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        if rc == 0:
            return k
        if rc != 1:
            return None
    return None


def main(argv):
    if len(argv) == 3 and argv[0] == "compare":
        print(json.dumps(compare(argv[1], argv[2])))
        return 0
    if len(argv) == 4 and argv[0] == "counts":
        print(json.dumps(counts(argv[1], argv[2], int(argv[3]))))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
