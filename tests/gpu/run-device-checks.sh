#!/bin/bash
# run-device-checks.sh - issue 7's checks on a machine with one CUDA GPU,
# PyTorch (NCCL) and sentence-transformers (docs/gpu-validation.md), and
# issue 15's items 3 and 4 (checks 6 and 7: completion tracking on the
# device, CUDA graph capture).
#
#   tests/gpu/build-carry.sh                        # first, on the build machine
#   bash tests/gpu/run-device-checks.sh [--cpu-dry-run] [--carry DIR] [--out DIR]
#
# Runs from the repository root with the carried build in .gpu-carry/.  On
# the device tool: carry [".gpu-carry"], command `bash tests/gpu/run-device-checks.sh`.
# Without a GPU (or with --cpu-dry-run) it runs every part that needs none,
# over the test-only host NCCL, and reports the GPU parts as SKIP.
#
# Output: one "PASS|FAIL|SKIP check: detail" line per check, and in OUT
# ($OUT when set, else _build/gpu-out): results.tsv, results-draft.md (the
# figures for docs/gpu-validation.md), logs/ and traces' audit tables.
# The whole run stops itself after CCSHIM_GPU_BUDGET_S (450) seconds; each
# command has its own limit, so nothing can hang it.  Exit status: 0 when
# nothing failed, 1 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
carry=$root/.gpu-carry
out=${OUT:-$root/_build/gpu-out}
dry=0
inner=0
while [ $# -gt 0 ]; do
    case $1 in
    --cpu-dry-run) dry=1; shift ;;
    --carry) carry=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --inner) inner=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "run-device-checks.sh: unknown argument '$1' (expected --cpu-dry-run, --carry DIR, --out DIR)" >&2; exit 2 ;;
    esac
done
budget=${CCSHIM_GPU_BUDGET_S:-450}
mkdir -p "$out/logs"
carry=$(cd "$carry" 2>/dev/null && pwd) || { echo "FAIL setup: no carried build (run tests/gpu/build-carry.sh first)"; exit 1; }
out=$(cd "$out" && pwd)

# The outer process: runs the checks in their own process group and kills
# the whole group if the budget is exceeded, then prints the results.
if [ "$inner" = 0 ]; then
    : > "$out/results.tsv"
    args=(--inner --carry "$carry" --out "$out")
    [ "$dry" = 1 ] && args+=(--cpu-dry-run)
    setsid bash "$0" "${args[@]}" &
    pid=$!
    t0=$(date +%s)
    # Polls rather than sleeping in a side process, so nothing outlives the run.
    while kill -0 "$pid" 2>/dev/null; do
        if [ $(($(date +%s) - t0)) -gt $((budget + 15)) ]; then
            echo "FAIL budget: the run exceeded $((budget + 15)) s; killed" >&2
            printf 'budget\tFAIL\t-\texceeded %s s, killed\n' "$((budget + 15))" >> "$out/results.tsv"
            kill -TERM -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
            break
        fi
        sleep 1
    done
    wait "$pid" 2>/dev/null
    echo "== results ($out/results.tsv)"
    column -t -s "$(printf '\t')" "$out/results.tsv" 2>/dev/null || cat "$out/results.tsv"
    ! grep -q "	FAIL	" "$out/results.tsv"
    exit $?
fi

# ------------------------------------------------------------------ helpers
t_start=$(date +%s)
left() { echo $((budget - ($(date +%s) - t_start))); }
# lim N: N seconds, or what is left of the budget minus a margin.
lim() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$((l > 1 ? l : 1))" || echo "$1"; }
# tmo N CMD...: CMD with a limit of (at most) N seconds.
tmo() { local n=$1; shift; timeout -k 5 "$(lim "$n")" "$@"; }
result() { # CHECK STATUS DETAIL
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(( $(date +%s) - t_start ))s" "$3" >> "$out/results.tsv"
    echo "$2 $1: $3"
}
log() { echo "-- $*"; }
figure() { printf '%s\n' "$*" >> "$out/figures.txt"; }
: > "$out/figures.txt"
PY=${PYTHON:-python3}
RUN="$carry/bin/ccshim-run"
AUDIT="$carry/bin/ccshim-audit"
TRAINER="$carry/bin/ccshim-trainer-nccl"
work=$(mktemp -d "${TMPDIR:-/tmp}/ccshim-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1
export CCSHIM_LIBDIR="$carry/lib"

# ---------------------------------------------------------- what is here
prefix=$(sed -n 's/^prefix //p' "$carry/MANIFEST" 2>/dev/null)
if [ -n "$prefix" ] && [ ! -e "$prefix" ] || [ -L "$prefix" ]; then ln -sfn "$carry" "$prefix"; fi
have_torch=0 have_gpu=0 have_st=0 torch_nccl_dir=
if info=$(tmo 60 "$PY" - <<'EOF' 2>"$out/logs/probe.err"
import glob, os, torch
print("torch", torch.__version__)
print("cuda", torch.version.cuda)
gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
print("gpu", torch.cuda.get_device_name(0) if gpu else "")
try:
    v = torch.cuda.nccl.version()
    print("nccl", ".".join(map(str, v)) if isinstance(v, tuple) else v)
except Exception:
    print("nccl", "")
sp = os.path.dirname(os.path.dirname(torch.__file__))
libs = glob.glob(os.path.join(sp, "nvidia", "nccl", "lib", "libnccl.so.2")) + \
       glob.glob(os.path.join(sp, "nvidia", "*", "lib", "libnccl.so.2"))
print("nccl_dir", os.path.dirname(libs[0]) if libs else "")
try:
    import sentence_transformers
    print("st", sentence_transformers.__version__)
except Exception as e:
    print("st", "")
EOF
); then
    have_torch=1
    torch_v=$(echo "$info" | sed -n 's/^torch //p')
    torch_nccl=$(echo "$info" | sed -n 's/^nccl //p')
    gpu_name=$(echo "$info" | sed -n 's/^gpu //p')
    st_v=$(echo "$info" | sed -n 's/^st //p')
    torch_nccl_dir=$(echo "$info" | sed -n 's/^nccl_dir //p')
    [ -n "$gpu_name" ] && have_gpu=1
    [ -n "$st_v" ] && have_st=1
fi
[ "$dry" = 1 ] && have_gpu=0
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
# An NCCL for the C programs: PyTorch's, else the system's.
nccl_dir=$torch_nccl_dir
for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -z "$nccl_dir" ] && [ -e "$d/libnccl.so.2" ] && nccl_dir=$d
done
# Carried libraries the machine lacks (libunwind, OpenBLAS, the CUDA runtime).
mkdir -p "$work/deps"
for _ in 1 2 3; do
    for obj in "$carry/lib/libccshim.so" "$TRAINER"; do
        LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}$work/deps" ldd "$obj" 2>/dev/null |
            awk '/not found/ { print $1 }' | while read -r so; do
                [ -e "$carry/deps/$so" ] && ln -sf "$carry/deps/$so" "$work/deps/$so"
            done
    done
done
deps_lp=$work/deps
# Only what the machine lacks is there, so every process may see it (the
# preloaded libccshim.so needs libunwind in PyTorch jobs too).
export LD_LIBRARY_PATH="$deps_lp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host: $(uname -srm); $(ldd --version 2>/dev/null | head -1)"
    echo "mode: $([ "$have_gpu" = 1 ] && echo "GPU" || echo "CPU dry run (no GPU used)")"
    echo "GPU: ${gpu_name:-none}; driver ${driver:-none}"
    echo "torch: ${torch_v:-not installed}; NCCL (torch): ${torch_nccl:-none}; sentence-transformers: ${st_v:-not installed}"
    echo "NCCL library for the C programs: ${nccl_dir:-none}"
    libs_used=$(find "$work/deps" -mindepth 1 -printf "%f ")
    echo "carried libraries used: ${libs_used:-none}"
    head -3 "$carry/MANIFEST"
} > "$out/versions.txt"
cat "$out/versions.txt"

# audit_counts TRACE FIRST_STEP: {"step": {"real": n, "deferred": n}, ...}
audit_counts() { "$PY" "$here/gpu_common.py" counts "$AUDIT" "$1" "$2"; }
# steps_are JSON REAL DEFERRED FROM: every step >= FROM has exactly these counts.
steps_are() {
    "$PY" -c 'import json, sys
c = json.loads(sys.argv[1]); r, d, f = map(int, sys.argv[2:5])
s = [v for k, v in c.items() if int(k) >= f]
sys.exit(0 if s and all(x["real"] == r and x["deferred"] == d for x in s) else 1)' "$1" "$2" "$3" "$4"
}
# equal_runs A B TOL: PASS when losses and parameters agree (bitwise, or within TOL relative).
equal_runs() {
    "$PY" "$here/gpu_common.py" compare "$1" "$2" > "$work/cmp.json" || return 2
    "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1])); tol = float(sys.argv[2])
ok = c["grads_bitwise_equal"] and c["params_bitwise_equal"] and c["losses_equal"]
near = c["grad_max_rel_diff"] <= tol and c["param_max_rel_diff"] <= tol and c["loss_max_abs_diff"] <= tol
print("bitwise equal" if ok else "max rel diff grads %.3g params %.3g, losses %.3g%s" % (
    c["grad_max_rel_diff"], c["param_max_rel_diff"], c["loss_max_abs_diff"], "" if near else " (above %g)" % tol))
sys.exit(0 if ok or near else 1)' "$work/cmp.json" "$3"
}
# dump_err A B: max |a - b| / max |b| over the grad and param lines of two --dump-grad files.
dump_err() {
    awk 'FNR == NR { if ($1 == "grad" || $1 == "param") a[$1 " " $2] = $3; next }
         $1 == "grad" || $1 == "param" { n++; k = $1 " " $2; if (!(k in a)) { bad = 1; next }
             d = a[k] - $3; if (d < 0) d = -d; if (d > num) num = d; v = $3 < 0 ? -$3 : $3; if (v > den) den = v }
         END { if (bad || n == 0) print "inf"; else printf "%.3e\n", den ? num / den : num }' "$1" "$2"
}
json_num() { grep '^{' "$1" | sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p"; }

# ------------------------------------------------- check 1: DDP reproduction
check1() {
    local c=ddp-cached d="$work/c1" backend=nccl py="$here/gpu_ddp_cached.py"
    mkdir -p "$d"
    if [ "$have_torch" = 0 ]; then result $c SKIP "no torch ($PY: $(tail -1 "$out/logs/probe.err"))"; return; fi
    [ "$have_gpu" = 0 ] && backend=gloo
    local env=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0)
    log "check 1: reference (no_sync on all but the last backward), $backend"
    if ! tmo 120 "${env[@]}" "$PY" "$py" --backend $backend --mode no-sync --out "$d/ref" --port 29511 \
        > "$out/logs/c1-ref.log" 2>&1; then
        result $c FAIL "the no_sync reference run failed: $(tail -1 "$out/logs/c1-ref.log")"; return
    fi
    if [ "$backend" = gloo ]; then
        tmo 120 "${env[@]}" "$PY" "$py" --backend gloo --mode per-minibatch --out "$d/plain" --port 29512 \
            > "$out/logs/c1-plain.log" 2>&1
        local eq
        if eq=$(equal_runs "$d/plain" "$d/ref" 1e-6); then
            result $c SKIP "no GPU: gloo dry run only (per-minibatch vs no_sync: $eq); gloo calls are not intercepted, no counts"
        else result $c FAIL "gloo dry run: per-minibatch differs from no_sync: $eq"; fi
        return
    fi
    local impl; impl=$(sed -n 's/.*"impl": "\([a-z]*\)".*/\1/p' "$d/ref/meta.json")
    local fails="" figs="" port=29513 i
    local names=(plain every auto) opts=("--coalesce off" "--coalesce every:8" "--coalesce auto")
    for i in 0 1 2; do
        local name=${names[$i]} opt=${opts[$i]}
        log "check 1: per-minibatch under ccshim ($opt)"
        # shellcheck disable=SC2086 # $opt is an option and its value
        if ! tmo 120 "${env[@]}" "$RUN" --no-mpi --torch $opt --trace-dir "$d/tr-$name" -- \
            "$PY" "$py" --backend nccl --mode per-minibatch --out "$d/$name" --port $port \
            > "$out/logs/c1-$name.log" 2>&1; then
            fails="$fails; $name run failed: $(grep -v '^ccshim' "$out/logs/c1-$name.log" | tail -1)"; port=$((port + 1)); continue
        fi
        port=$((port + 1))
        "$AUDIT" --no-symbols "$d/tr-$name" > "$out/logs/c1-$name.audit.txt" 2>&1
        local cnt; cnt=$(audit_counts "$d/tr-$name" 1)
        local eq; eq=$(equal_runs "$d/$name" "$d/ref" 1e-6); local eqrc=$?
        case $name in
        plain) steps_are "$cnt" 8 0 1 || fails="$fails; plain: expected 8 real allreduces per step, got $cnt" ;;
        every) steps_are "$cnt" 1 7 1 || fails="$fails; every:8: expected 1 real + 7 deferred per step, got $cnt" ;;
        # auto under --torch: the cached embedding's 8 no-grad forwards
        # announce the step, and DDP itself skips 7 of its 8 synchronisations
        # from the first step (docs/coalescing.md): nothing is deferred
        auto) steps_are "$cnt" 1 0 1 || fails="$fails; auto: expected 1 real per step (DDP skipping the other 7) from step 1, got $cnt" ;;
        esac
        [ $eqrc = 0 ] || fails="$fails; $name gradients differ from no_sync: $eq"
        figure "check 1 ($impl loss): $name: allreduce per step (real/deferred, steps>=1) $cnt; vs no_sync: $eq"
        figs="$figs ${name}[$eq]"
    done
    if [ -z "$fails" ]; then result $c PASS "8 ncclAllReduce/step as issued, 1 real with every:8 and auto; gradients vs no_sync:$figs"
    else result $c FAIL "${fails#; }"; fi
}

# ------------------------------------------ check 2: sentence-transformers
check2() {
    local c=st-cmnrl d="$work/c2" py="$here/gpu_st_cmnrl.py"
    mkdir -p "$d"
    if [ "$have_torch" = 0 ]; then result $c SKIP "no torch"; return; fi
    if [ "$have_st" = 0 ]; then result $c SKIP "sentence-transformers not installed for $PY"; return; fi
    local env=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0)
    if [ "$have_gpu" = 0 ]; then
        if tmo 150 "${env[@]}" "$PY" "$py" --backend gloo --out "$d/gloo" --port 29521 > "$out/logs/c2-gloo.log" 2>&1
        then result $c SKIP "no GPU: gloo dry run ran ($(tail -1 "$out/logs/c2-gloo.log")); no NCCL, no counts"
        else result $c FAIL "gloo dry run failed: $(tail -1 "$out/logs/c2-gloo.log")"; fi
        return
    fi
    local per=8 fails="" port=29522 r plain_real=
    for r in "plain:--coalesce off" "every:--coalesce every:8" "auto:--coalesce auto"; do
        local name=${r%%:*} opt=${r#*:}
        log "check 2: CachedMultipleNegativesRankingLoss under ccshim ($opt)"
        # shellcheck disable=SC2086
        if ! tmo 150 "${env[@]}" "$RUN" --no-mpi --torch $opt --trace-dir "$d/tr-$name" -- \
            "$PY" "$py" --backend nccl --out "$d/$name" --port $port > "$out/logs/c2-$name.log" 2>&1; then
            fails="$fails; $name run failed: $(grep -v '^ccshim' "$out/logs/c2-$name.log" | tail -1)"; port=$((port + 1)); continue
        fi
        port=$((port + 1))
        "$AUDIT" --no-symbols "$d/tr-$name" > "$out/logs/c2-$name.audit.txt" 2>&1
        local cnt; cnt=$(audit_counts "$d/tr-$name" 1)
        if [ "$name" = plain ]; then
            plain_real=$("$PY" -c 'import json,sys; c=json.loads(sys.argv[1]); print(c["1"]["real"] if "1" in c else 0)' "$cnt")
            local pb; pb=$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import gpu_common as g
print(g.per_buffer_max(sys.argv[2], sys.argv[3], 64))' "$here" "$AUDIT" "$d/tr-plain")
            local nb=$((plain_real / per))
            { [ "$pb" = "$per" ] && [ $((nb * per)) = "$plain_real" ] && [ "$nb" -ge 1 ] &&
              steps_are "$cnt" "$plain_real" 0 1; } ||
                fails="$fails; plain: expected $per reductions per bucket per step (max per buffer $pb, per step $cnt)"
            figure "check 2: plain: $plain_real allreduce per step = $nb bucket(s) x $per (2 columns x ceil(32/8)); most on one buffer in a step: $pb"
        else
            # auto: DDP itself skips from the first step (announced), nothing deferred
            local nb=$((plain_real / per))
            local nd=$((nb * (per - 1)))
            [ "$name" = auto ] && nd=0
            steps_are "$cnt" "$nb" "$nd" 1 ||
                fails="$fails; $name: expected $nb real + $nd deferred per step from step 1, got $cnt"
            local eq; eq=$(equal_runs "$d/$name" "$d/plain" 1e-5) || fails="$fails; $name differs from plain: $eq"
            figure "check 2: $name: per step $cnt; losses and parameters vs plain: $eq"
        fi
    done
    local v; v=$(sed -n 's/.*"sentence_transformers": "\([^"]*\)".*/\1/p' "$d/plain/meta.json" 2>/dev/null)
    if [ -z "$fails" ]; then result $c PASS "sentence-transformers $v: $per reductions per bucket per step, 1 with every:8 and auto, same losses and parameters"
    else result $c FAIL "${fails#; }"; fi
}

# ------------------------------------------------ check 3: trainer over NCCL
# trainer_run NAME WORLD DEVICE LP [SHIM_OPTS...]: the NCCL trainer on WORLD
# ranks (RANK/WORLD_SIZE), rank 0's output in $work/c3/NAME.out, trace in NAME.tr.
trainer_run() {
    local name=$1 w=$2 dev=$3 lp=$4; shift 4
    local d="$work/c3" args pids=() r rc=0
    read -r args < "$carry/expected/args"
    for r in $(seq 0 $((w - 1))); do
        local pre=()
        [ $# -gt 0 ] && pre=("$RUN" --no-mpi --trace-dir "$d/$name.tr" "$@" --)
        # shellcheck disable=SC2086 # $args is a list of options
        RANK=$r WORLD_SIZE=$w LD_LIBRARY_PATH="$lp" FAKENCCL_TIMEOUT=20 tmo 90 "${pre[@]}" "$TRAINER" $args \
            --sync per-minibatch --device "$dev" --nccl-id-file "$d/$name.id" --dump-grad "$d/$name.dump.$r" \
            > "$d/$name.out.$r" 2> "$d/$name.err.$r" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=$?; done
    cp "$d/$name.err.0" "$out/logs/c3-$name.err" 2>/dev/null
    return $rc
}
# trainer_case NAME WORLD DEVICE LP EXPECT_REAL EXPECT_DEFERRED FROM REF [SHIM_OPTS...]
trainer_case() {
    local name=$1 w=$2 dev=$3 lp=$4 real=$5 def=$6 from=$7 ref=$8; shift 8
    local d="$work/c3"
    if ! trainer_run "$name" "$w" "$dev" "$lp" "$@"; then
        fails="$fails; $name: the trainer failed: $(grep -v '^ccshim' "$d/$name.err.0" | tail -1)"; return
    fi
    local exp="$carry/expected/$ref" err
    err=$(dump_err "$d/$name.dump.0" "$exp.dump")
    local own; own=$(json_num "$d/$name.out.0" reductions_per_step)
    local line="$name ($w rank(s), $dev): trainer's own count $own/step"
    if [ $# -gt 0 ]; then
        local cnt; cnt=$(audit_counts "$d/$name.tr" 0)
        steps_are "$cnt" "$real" "$def" "$from" || fails="$fails; $name: expected $real real + $def deferred per step from step $from, got $cnt"
        line="$line; ccshim: $cnt"
    fi
    if cmp -s "$d/$name.dump.0" "$exp.dump"; then line="$line; gradients and parameters bitwise equal to MPI ($ref)"
    elif awk -v x="$err" 'BEGIN { exit !(x != "inf" && x + 0 < 1e-12) }'; then line="$line; max rel diff vs MPI ($ref) $err"
    else fails="$fails; $name: gradients differ from the MPI backend's ($ref): $err"; line="$line; DIFFERS from MPI: $err"; fi
    figure "check 3: $line"
}
check3() {
    local c=trainer-nccl fails=""
    mkdir -p "$work/c3"
    if [ ! -f "$carry/expected/args" ]; then result $c SKIP "no MPI reference figures in the carry (built without MPI)"; return; fi
    read -r args < "$carry/expected/args"
    figure "check 3: trainer arguments: $args --sync per-minibatch"
    local host_lp="$carry/fake:$deps_lp"
    # Over the test-only host NCCL: 1 and 2 ranks, as the MPI backend.
    trainer_case host-w1 1 host "$host_lp" 16 0 0 mpi-w1-per-minibatch --coalesce off
    trainer_case host-w2 2 host "$host_lp" 8 0 0 mpi-w2-per-minibatch --coalesce off
    trainer_case host-w2-every 2 host "$host_lp" 1 7 0 mpi-w2-per-step --coalesce every:8
    if [ "$have_gpu" = 0 ] || [ -z "$nccl_dir" ]; then
        if [ -z "$fails" ]; then
            result $c SKIP "no GPU$([ -n "$nccl_dir" ] || echo "/NCCL"): host-NCCL part passed (counts 16 and 8 per step, 1+7 with every:8, gradients as MPI)"
        else result $c FAIL "${fails#; }"; fi
        return
    fi
    local lp="$nccl_dir:$deps_lp"
    trainer_case cuda-w1-noshim 1 cuda "$lp" 0 0 0 mpi-w1-per-minibatch
    trainer_case cuda-w1 1 cuda "$lp" 16 0 0 mpi-w1-per-minibatch --coalesce off
    trainer_case cuda-w1-every 1 cuda "$lp" 1 15 0 mpi-w1-per-step --coalesce every:16
    trainer_case cuda-w1-auto 1 cuda "$lp" 1 15 2 mpi-w1-per-step --coalesce auto
    if [ -z "$fails" ]; then result $c PASS "NCCL on the GPU and host NCCL: the MPI backend's counts and gradients (see figures)"
    elif grep -qs "insufficient\|driver version" "$work/c3"/cuda-*.err.0; then
        result $c SKIP "the carried CUDA runtime needs a newer driver (${driver:-?}): $(grep -h "insufficient\|driver version" "$work/c3"/cuda-*.err.0 | head -1)"
    else result $c FAIL "${fails#; }"; fi
}

# ----------------------------------------------- check 4: per-call overhead
check4() {
    local c=overhead bench="$carry/tests/nccl_bench" mode=cuda lp
    if [ "$have_gpu" = 1 ] && [ -n "$nccl_dir" ]; then lp="$nccl_dir:$deps_lp"
    else mode=host; lp="$carry/fake:$deps_lp"; fi
    local opt=(); [ $mode = host ] && opt=(--host)
    local off=() on=() i v
    for i in 1 2 3; do # alternated, so drifts hit both sides alike
        v=$(LD_LIBRARY_PATH="$lp" tmo 60 "$bench" "${opt[@]}" 2>>"$out/logs/c4.err" | awk '{ print $2 }')
        [ -n "$v" ] && off+=("$v")
        v=$(LD_LIBRARY_PATH="$lp" RANK=0 WORLD_SIZE=1 tmo 60 "$RUN" --no-mpi -- "$bench" "${opt[@]}" 2>>"$out/logs/c4.err" | awk '{ print $2 }')
        [ -n "$v" ] && on+=("$v")
    done
    if [ ${#off[@]} -lt 3 ] || [ ${#on[@]} -lt 3 ]; then
        result $c FAIL "the bench failed: $(grep -v '^ccshim' "$out/logs/c4.err" | tail -1)"; return
    fi
    local med_off med_on
    med_off=$(printf '%s\n' "${off[@]}" | sort -g | sed -n 2p)
    med_on=$(printf '%s\n' "${on[@]}" | sort -g | sed -n 2p)
    local ratio; ratio=$(awk -v a="$med_on" -v b="$med_off" 'BEGIN { printf "%.3f", a / b }')
    local delta; delta=$(awk -v a="$med_on" -v b="$med_off" 'BEGIN { printf "%.0f", a - b }')
    figure "check 4 ($mode): ncclAllReduce of 256 float32, enqueue ns/call: without ${off[*]}, with ccshim ${on[*]}; medians $med_off vs $med_on: ratio $ratio (+$delta ns)"
    if [ $mode = cuda ]; then result $c PASS "enqueue $med_off ns -> $med_on ns per call with ccshim (x$ratio, +$delta ns)"
    else result $c SKIP "no GPU: on the host NCCL $med_off -> $med_on ns per call (x$ratio); not the GPU figure"; fi
}

# ------------------------------------------------ check 5: desync on NCCL
check5() {
    local c=desync-nccl d="$work/c5" fails="" notes=""
    mkdir -p "$d"
    # The protocol, over two ranks of the host NCCL: rank 1 skips a mini-batch in step 1.
    read -r args < "$carry/expected/args" 2>/dev/null || args="--batch 64 --mini-batch 8 --steps 3"
    local pids=() r
    for r in 0 1; do
        # shellcheck disable=SC2086
        RANK=$r WORLD_SIZE=2 LD_LIBRARY_PATH="$carry/fake:$deps_lp" FAKENCCL_TIMEOUT=15 tmo 60 "$RUN" --no-mpi \
            --on-desync abort --log-level info --trace-dir "$d/tr" -- "$TRAINER" $args --device host --inject skip-minibatch:1:1 \
            --nccl-id-file "$d/id" > "$d/out.$r" 2> "$d/err.$r" &
        pids+=($!)
    done
    local rcs=""
    for r in "${pids[@]}"; do wait "$r"; rcs="$rcs $?"; done
    cat "$d/err.0" "$d/err.1" > "$out/logs/c5-protocol.err" 2>/dev/null
    local line; line=$(grep -hE '^ccshim (DESYNC|MISMATCH)' "$d/err.0" "$d/err.1" | head -1)
    # Rank 1 issued one collective fewer: all of its calls were matched and it
    # may finish normally, as it would with NCCL; the rank left waiting must
    # end with an error (its pending call fails once the communicator is
    # aborted), and nothing may be killed by a timeout.
    case " $rcs " in *" 124 "*|*" 137 "*) fails="$fails; protocol: a rank hung until the timeout (exit statuses$rcs)" ;; esac
    case "$rcs" in *[1-9]*) ;; *) fails="$fails; protocol: no rank ended with an error (exit statuses$rcs)" ;; esac
    # With two ranks either side may be named: one issued more, or the other fewer.
    [ -n "$line" ] || fails="$fails; protocol: no DESYNC verdict"
    grep -q "aborting the job after the verdict" "$d/err.0" "$d/err.1" || fails="$fails; protocol: no abort after the verdict"
    grep -q "no abort function succeeded" "$d/err.0" "$d/err.1" && fails="$fails; protocol: ncclCommAbort did not succeed"
    figure "check 5 (host NCCL, 2 ranks, --inject skip-minibatch:1:1, abort): exit statuses$rcs; ${line:-no verdict}"
    # The same protocol with the MPI backend, measured on the build machine (make-expected.sh).
    if [ -s "$carry/expected/protocol.txt" ]; then
        while IFS="$(printf '\t')" read -r inj st ms verdict; do
            figure "check 5 (MPI on the build machine, 2 ranks, --inject $inj, abort): $st after $ms; $verdict"
        done < "$carry/expected/protocol.txt"
    fi
    if [ "$have_gpu" = 0 ] || [ -z "$nccl_dir" ]; then
        if [ -z "$fails" ]; then result $c SKIP "no GPU: protocol part passed on the host NCCL (verdict, ncclCommAbort); GPU part not run"
        else result $c FAIL "${fails#; }"; fi
        return
    fi
    # The GPU: an all-reduce enqueued behind a stream wait, seen by the shim while stuck.
    local lp="$nccl_dir:$deps_lp" stuck="$carry/tests/gpu_stuck"
    RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$lp" tmo 60 "$RUN" --no-mpi --trace-dir "$d/st" -- \
        "$stuck" --release "$d/marker" 3000 > "$d/stuck.out" 2> "$d/stuck.err" &
    local sp=$! i
    for i in $(seq 1 300); do { [ -e "$d/marker" ] || ! kill -0 $sp 2>/dev/null; } && break; sleep 0.1; done
    sleep 1 # two writer periods
    local during; during=$(audit_counts "$d/st" 0 2>/dev/null)
    wait $sp; local src=$?
    cat "$d/stuck.out" "$d/stuck.err" > "$out/logs/c5-stuck.log"
    if [ $src = 3 ]; then notes="$notes; stuck op: SKIP ($(grep -v '^ccshim' "$d/stuck.err" | tail -1))"
    else
        [ $src = 0 ] || fails="$fails; stuck op: gpu_stuck --release failed ($src): $(tail -1 "$d/stuck.out")"
        echo "$during" | grep -q '"real": [1-9]' || fails="$fails; stuck op: not in the trace while pending ($during)"
        figure "check 5 (GPU): $(head -1 "$d/stuck.out" | tr -d '\n'); ccshim's trace while pending: $during"
    fi
    # ncclCommAbort through the shim on the stuck communicator.
    RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$lp" tmo 60 "$RUN" --no-mpi --trace-dir "$d/ab" -- \
        "$stuck" --abort "$d/marker2" 500 > "$d/abort.out" 2> "$d/abort.err"
    local arc=$?
    cat "$d/abort.out" "$d/abort.err" > "$out/logs/c5-abort.log"
    if [ $arc = 3 ]; then notes="$notes; abort: SKIP ($(grep -v '^ccshim' "$d/abort.err" | tail -1))"
    else
        [ $arc = 0 ] || fails="$fails; abort: ncclCommAbort on the stuck communicator failed ($arc): $(grep abort "$d/abort.out")"
        grep -q "released by the watchdog" "$d/abort.out" &&
            notes="$notes; ncclCommAbort returned only once the stream wait was released (NCCL waits for the user stream)"
        "$AUDIT" --tsv-records "$d/ab" 2>/dev/null | grep -q "comm_abort" || fails="$fails; abort: no comm_abort record"
        figure "check 5 (GPU): $(grep '^abort' "$d/abort.out")"
    fi
    # Device completion through CUDA events (the driver API): only if the library does it.
    if grep -aq "cuEventQuery" "$carry/lib/libccshim.so"; then
        notes="$notes; device completion through CUDA events: check 6"
    else
        notes="$notes; device-completion tracking: SKIP (libccshim.so does not query CUDA events: ccs_desync_nccl_done has no caller, so an NCCL rank is never 'blocked')"
    fi
    if [ -z "$fails" ]; then result $c PASS "verdict + ncclCommAbort on the host NCCL; stuck GPU all-reduce traced, ncclCommAbort returns$notes"
    else result $c FAIL "${fails#; }$notes"; fi
}

# ------------------------------- check 6: completion tracking on the device
# (issue 15, item 3.)  GPU: gpu_stuck enqueues an all-reduce behind a stream
# wait that fires only when released (after 3 s): ccshim must say within 2 s
# that it was enqueued and has not completed, then that it progressed once
# released, with no verdict.  Dry run: the test NCCL in asynchronous mode on
# the test CUDA driver, one all-reduce taking 2.5 s.
check6() {
    local c=completion d="$work/c6" fails="" mode lp log
    mkdir -p "$d"
    log="$d/log.txt"
    if [ "$have_gpu" = 1 ] && [ -n "$nccl_dir" ]; then
        mode=GPU
        lp="$nccl_dir:$deps_lp"
        RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$lp" CCSHIM_LOG="$log" CCSHIM_LOG_LEVEL=info tmo 60 "$RUN" --no-mpi -- \
            "$carry/tests/gpu_stuck" --release "$d/marker" 3000 > "$d/out" 2> "$d/err"
        local src=$?
        if [ $src = 3 ]; then result $c SKIP "gpu_stuck: $(grep -v '^ccshim' "$d/err" | tail -1)"; return; fi
        [ $src = 0 ] || fails="$fails; gpu_stuck --release failed ($src): $(tail -1 "$d/out")"
    else
        mode="dry run (test NCCL and test CUDA driver)"
        if [ ! -e "$carry/fakecuda/libcuda.so.1" ] || [ ! -x "$carry/tests/nccl_track" ]; then
            result $c SKIP "no GPU, and the carry has no test CUDA driver"; return
        fi
        RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$carry/fake:$carry/fakecuda:$deps_lp" FAKENCCL_ASYNC=1 FAKENCCL_DELAY_MS=2500 \
            CCSHIM_LOG="$log" CCSHIM_LOG_LEVEL=info tmo 60 "$RUN" --no-mpi -- "$carry/tests/nccl_track" slow \
            > "$d/out" 2> "$d/err" || fails="$fails; nccl_track slow failed: $(tail -1 "$d/err")"
    fi
    cp "$log" "$out/logs/c6.log" 2>/dev/null
    grep -q "NCCL completion tracking on" "$log" 2>/dev/null || fails="$fails; tracking did not start (no CUDA driver found?)"
    local stuck; stuck=$(grep -o "enqueued [0-9]*, completed [0-9]* on the device; no progress for [0-9.]* s" "$log" | head -1)
    local secs; secs=$(echo "$stuck" | sed -n 's/.* for \([0-9.]*\) s$/\1/p')
    if [ -z "$stuck" ]; then fails="$fails; the pending all-reduce was never reported as not completed"
    elif ! awk -v s="$secs" 'BEGIN { exit !(s <= 2.0) }'; then fails="$fails; reported after $secs s (more than 2 s)"; fi
    local again; again=$(grep -o "progress on the device again after [0-9.]* s" "$log" | head -1)
    [ -n "$again" ] || fails="$fails; no progress seen once released"
    grep -Eq "^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) " "$log" && fails="$fails; a verdict: $(grep -E '^ccshim (MISMATCH|DESYNC|DEAD|STRAGGLER) ' "$log" | head -1)"
    local st; st=$(grep -o "NCCL completion tracking: .*" "$log" | tail -1)
    figure "check 6 ($mode): '${stuck:-none}'; '${again:-none}'; ${st:-no statistics}"
    if [ -n "$fails" ]; then result $c FAIL "${fails#; }"
    elif [ "$mode" = GPU ]; then result $c PASS "$stuck; $again; no verdict"
    else result $c SKIP "no GPU: dry run passed ($stuck; $again; no verdict)"; fi
}

# -------------------------------------------- check 7: CUDA graph capture
# (issue 15, item 4.)  GPU: gpu_graph.py captures "x += 1; all_reduce(x)" in
# torch.cuda.graph under ccshim with coalescing on (every:2): the capture
# must succeed (an event recorded or a stream queried during a global-mode
# capture would invalidate it), the call be flagged captured, no
# communicator be created inside the capture (the same comm_init records as
# with coalescing off), and the replays compute 1 + replays.  Dry run:
# nccl_track capture on the test libraries (the test driver counts events
# recorded and queries made while capturing).
check7() {
    local c=graph-capture d="$work/c7" fails=""
    mkdir -p "$d"
    if [ "$have_gpu" = 1 ] && [ "$have_torch" = 1 ]; then
        local r inits=()
        for r in off every:2; do
            RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 CCSHIM_LOG="$d/log-$r.txt" CCSHIM_LOG_LEVEL=info tmo 120 "$RUN" --no-mpi \
                --torch --coalesce "$r" --trace-dir "$d/tr-$r" -- "$PY" "$here/gpu_graph.py" --port $((29571 + ${#inits[@]})) \
                > "$d/out-$r" 2>&1 || fails="$fails; coalesce $r: gpu_graph.py failed: $(grep -v '^ccshim' "$d/out-$r" | tail -1)"
            cp "$d/log-$r.txt" "$out/logs/c7-$r.log" 2>/dev/null
            inits+=("$("$AUDIT" --tsv-records "$d/tr-$r" 2>/dev/null | grep -c "comm_init")")
        done
        local line; line=$(grep "^graph captured" "$d/out-every:2")
        local capt; capt=$("$AUDIT" --tsv-records "$d/tr-every:2" 2>/dev/null | grep "allreduce" | grep -c "captured")
        [ "${capt:-0}" -ge 1 ] || fails="$fails; no all-reduce flagged captured in the trace"
        [ "${inits[0]}" = "${inits[1]}" ] || fails="$fails; comm_init records: ${inits[0]} without coalescing, ${inits[1]} with (a communicator made in the capture?)"
        local st; st=$(grep -o "NCCL completion tracking: .*" "$d/log-every:2.txt" | tail -1)
        figure "check 7 (GPU): ${line:-no output}; records flagged captured: $capt; comm_init records ${inits[*]}; ${st:-no statistics}"
        if [ -z "$fails" ]; then result $c PASS "${line}; $capt call(s) flagged captured; no communicator made in the capture"
        else result $c FAIL "${fails#; }"; fi
        return
    fi
    if [ ! -e "$carry/fakecuda/libcuda.so.1" ] || [ ! -x "$carry/tests/nccl_track" ]; then
        result $c SKIP "no GPU, and the carry has no test CUDA driver"; return
    fi
    RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$carry/fake:$carry/fakecuda:$deps_lp" FAKENCCL_ASYNC=1 CCSHIM_LOG="$d/log.txt" \
        tmo 60 "$RUN" --no-mpi --coalesce every:2 --trace-dir "$d/tr" -- "$carry/tests/nccl_track" capture \
        > "$d/out" 2> "$d/err" || fails="$fails; nccl_track capture failed: $(tail -1 "$d/err")"
    grep -q "^recorded_while_capturing=0$" "$d/out" || fails="$fails; an event was recorded on the captured stream"
    grep -q "^queried_while_capturing=0$" "$d/out" || fails="$fails; the captured stream was queried"
    grep -q "^comms_created_during=0$" "$d/out" || fails="$fails; a communicator was created inside the capture"
    local capt; capt=$("$AUDIT" --tsv-records "$d/tr" 2>/dev/null | grep "allreduce" | grep -c "captured")
    [ "$capt" = 4 ] || fails="$fails; $capt records flagged captured (expected 4)"
    figure "check 7 (dry run, test libraries): $(tr '\n' ' ' < "$d/out")flagged captured: $capt"
    if [ -z "$fails" ]; then result $c SKIP "no GPU: dry run passed (no event or query while capturing, no communicator, 4 calls flagged captured)"
    else result $c FAIL "${fails#; }"; fi
}

for chk in check1 check2 check3 check4 check5 check6 check7; do
    if [ "$(left)" -lt 30 ]; then result "$chk" SKIP "time budget spent"; continue; fi
    log "== $chk ($(left) s left)"
    "$chk"
done

{
    echo "## Results of the run of $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    sed 's/^/    /' "$out/versions.txt"
    echo
    echo "| check | result | at | detail |"
    echo "| --- | --- | --- | --- |"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$out/results.tsv"
    echo
    echo "Figures:"
    echo
    sed 's/^/- /' "$out/figures.txt"
} > "$out/results-draft.md"
echo "== draft for docs/gpu-validation.md: $out/results-draft.md"
