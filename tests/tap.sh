# tests/tap.sh - sourced by shell tests: TAP output and MPI launching with a
# timeout that never leaves a process behind.
#
#   . "$top_srcdir/tests/tap.sh"
#   tap_plan 3
#   tap_check "name" test "$a" = "$b"
#   tap_skip_all "why"          # exit 0 with "1..0 # SKIP why"
#   ccs_mpirun 60 4 ./prog args # mpirun -np 4 with a 60 s limit
set -u
: "${top_srcdir:?tests must run under make check (top_srcdir unset)}"
: "${top_builddir:?tests must run under make check (top_builddir unset)}"
TAP_N=0
TAP_FAILED=0
CCS_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ccshim-test.XXXXXX")
CCS_KEEP=${CCS_KEEP:-0}

tap_cleanup() {
    ccs_kill_all
    if [ "$CCS_KEEP" = 1 ]; then echo "# kept $CCS_TMP"; else rm -rf "$CCS_TMP"; fi
}
trap tap_cleanup EXIT
trap 'exit 130' INT TERM

tap_plan() { echo "1..$1"; }
tap_skip_all() { echo "1..0 # SKIP $*"; exit 0; }
tap_ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $*"; }
tap_not_ok() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $*"; }
tap_skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP ${2:-}"; }
tap_diag() { sed 's/^/# /'; }
# tap_check NAME CMD...: ok when CMD succeeds.
tap_check() {
    local name=$1; shift
    if "$@"; then tap_ok "$name"; else tap_not_ok "$name"; fi
}
# tap_eq NAME EXPECTED ACTUAL
tap_eq() {
    if [ "$2" = "$3" ]; then tap_ok "$1"; else tap_not_ok "$1"; echo "#   expected: $2"; echo "#   actual:   $3"; fi
}

CCS_PGIDS=""
# Kills every process group started by ccs_run_timeout that is still alive.
ccs_kill_all() {
    local g
    for g in $CCS_PGIDS; do kill -KILL "-$g" 2>/dev/null; done
    CCS_PGIDS=""
}

# ccs_dump_stacks SID: the threads' stacks of every process of session SID,
# as TAP comments (gdb, where installed): what a test that timed out was
# waiting in, kept in its log (a hang seen once is a bug to find).
ccs_dump_stacks() {
    command -v gdb >/dev/null 2>&1 || return 0
    local p
    for p in $(ps -eo pid=,sid=,stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ {print $1}'); do
        echo "# stacks of $(ps -o pid=,args= -p "$p" 2>/dev/null | cut -c1-160):"
        timeout 30 gdb -nx -p "$p" -batch -ex "set pagination off" -ex "thread apply all bt 16" 2>/dev/null |
            grep -E '^(Thread|#[0-9])' | cut -c1-200 | head -n 120 | sed 's/^/#   /'
    done
}

# ccs_run_timeout SECONDS CMD...: runs CMD in its own process group; on
# timeout logs its processes' stacks (ccs_dump_stacks), kills the whole group
# (TERM, then KILL) and returns 124.
ccs_run_timeout() {
    local secs=$1; shift
    setsid "$@" &
    local pid=$!
    CCS_PGIDS="$CCS_PGIDS $pid"
    local waited=0 rc alone=0 seen=0
    while kill -0 "$pid" 2>/dev/null; do
        # A launcher (CCS_LAUNCHER=1: mpirun) left alone in its session for
        # 5 s, every rank ended: Open MPI 4.1's mpirun at times hangs (or
        # crashes in PMIx_server_finalize) after an MPI_Abort while a rank
        # was in MPI_Finalize.  The job has ended; the launcher is stopped.
        # (Ranks it killed and no longer reaps are zombies: ended too.)
        # Only once its ranks were seen: a launcher slow to start them (a
        # loaded machine) is alone in its session before, not after.
        if [ "${CCS_LAUNCHER:-0}" = 1 ] && [ $((waited % 10)) -eq 0 ]; then
            local others
            others=$(ps -eo pid=,sid=,stat= | awk -v s="$pid" '$2 == s && $1 != s {n++; if ($3 !~ /^Z/) a++}
                                                           END {print n + 0, a + 0}')
            [ "${others% *}" -gt 0 ] && seen=1
            if [ "$seen" = 1 ] && [ "${others#* }" -eq 0 ] && [ "$waited" -ge 30 ]; then
                alone=$((alone + 1))
            else
                alone=0
            fi
            if [ "$alone" -ge 5 ]; then
                kill -KILL "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
                echo "# launcher hung after every rank had ended; stopped: $*"
                return 125
            fi
        fi
        if [ "$waited" -ge $((secs * 10)) ]; then
            ccs_dump_stacks "$pid"
            kill -TERM "-$pid" 2>/dev/null; sleep 1; kill -KILL "-$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            echo "# timed out after ${secs}s: $*"
            return 124
        fi
        sleep 0.1; waited=$((waited + 1))
    done
    wait "$pid"; rc=$?
    kill -KILL "-$pid" 2>/dev/null # stray children of a finished launcher
    return $rc
}

# ccs_mpirun SECONDS NP CMD...: the MPI launcher with a timeout: Open MPI's
# mpirun (as root if need be, shared memory only), or MPICH's Hydra
# mpiexec for a build against MPICH (scripts/check-mpich.sh).
ccs_mpirun() {
    local secs=$1 np=$2; shift 2
    if [ "$CCS_MPI_HYDRA" = 1 ]; then
        # (Not CCS_LAUNCHER: Hydra starts its proxy and each rank in a session
        # of their own, so the launcher is always "alone" in its session;
        # ending it ends them.)
        ccs_run_timeout "$secs" "$MPIRUN" -n "$np" "$@"
        return
    fi
    CCS_LAUNCHER=1 ccs_run_timeout "$secs" "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe \
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
        -np "$np" "$@"
}
CCS_MPI_HYDRA=0
case "$([ -n "${MPIRUN:-}" ] && "$MPIRUN" --version 2>/dev/null | head -2)" in *HYDRA*) CCS_MPI_HYDRA=1 ;; esac

# ccs_listening PORT: something listens on TCP PORT (ss, iproute2).
ccs_listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
# ccs_wait_listen PORT SECONDS: waits, at most SECONDS, until something
# listens on PORT; 1 when nothing did.
ccs_wait_listen() {
    local i=0
    while ! ccs_listening "$1"; do
        [ $i -lt $(($2 * 10)) ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}

# ccs_ports N: the first of N consecutive TCP ports for 127.0.0.1, given
# to no other test of this user's runs (a counter in $TMPDIR, under
# flock; the C tests' ccs_test_ports in test_ports.h shares it) and on which
# nothing listens.  Ports from the process id collided when make -j started
# two tests with pids one apart (one test's PORT + 1 was the other's PORT).
# The range, 20000-31999, lies below the kernel's ephemeral ports.
ccs_ports() {
    local n=$1 f="${TMPDIR:-/tmp}/ccshim-test-ports-$(id -u)" p
    p=$( (
        flock 9 || exit 1
        p=$(cat "$f" 2>/dev/null) || p=
        case $p in '' | *[!0-9]*) p=$((20000 + $$ % 12000)) ;; esac
        tries=0
        while [ $tries -lt 1000 ]; do
            [ $((p + n)) -le 32000 ] || p=20000
            i=0
            while [ $i -lt "$n" ] && ! ccs_listening $((p + i)); do i=$((i + 1)); done
            [ $i -eq "$n" ] && break
            p=$((p + i + 1)); tries=$((tries + 1))
        done
        echo $((p + n)) >"$f"
        echo "$p"
    ) 2>/dev/null 9>>"$f.lock")
    # Without flock (util-linux) or a writable $TMPDIR: the process id's.
    echo "${p:-$((20000 + $$ % 12000))}"
}

ccs_have_mpi() { [ -n "${MPIRUN:-}" ] && [ -x "$top_builddir/.libs/libccshim-mpi.so" ]; }

# Paths every test uses.
CCSHIM_RUN="$top_builddir/ccshim-run"
CCSHIM_AUDIT="$top_builddir/ccshim-audit"
CCSHIM_TRAINER="$top_builddir/ccshim-trainer"

# json_q FILE EXPR: prints EXPR (Python) of the JSON document in FILE as d.
json_q() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

tap_done() { [ "$TAP_FAILED" -eq 0 ]; }
