# tests/realstack/torch2.sh - sourced by tests/realstack/torch2-*.sh: runs
# one of tests/torch/'s tests (written for Debian's torch 1.13) on torch 2.13
# from the real-stack tier's virtual environment, where ccshim_torch's
# torch >= 2.0 paths run; skipped, with the reason, where the environment
# could not be made.
# torch2_run TEST.sh: execs tests/torch/TEST.sh with TORCH_PYTHON set.
torch2_run() {
    : "${top_srcdir:?tests must run under make check (top_srcdir unset)}"
    local venv=${CCSHIM_VENV:-$HOME/.cache/ccshim/venv-st} why
    if [ ! -x "$venv/bin/python" ]; then
        why="no $venv (scripts/setup.sh makes it with scripts/realstack-venv.sh)"
        [ -f "$venv.status" ] && why="$(sed -n '1s/^skip: //p' "$venv.status") ($venv.status)"
        echo "1..0 # SKIP real-stack tier: $why"
        exit 0
    fi
    TORCH_PYTHON=$venv/bin/python
    export TORCH_PYTHON
    exec sh "$top_srcdir/tests/torch/$1"
}
