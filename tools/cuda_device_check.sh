#!/usr/bin/env bash
# The CUDA backend's checks on a machine with an NVIDIA GPU (docs/CUDA.md,
# "Checking on a GPU"), as steps that each fit one short device command
# and each run alone:
#
#   tools/cuda_device_check.sh build       build the CLI and the CUDA tests for this GPU
#                                          (warnings as errors), run the device tests, and
#                                          compute-sanitizer memcheck on the scorer and
#                                          attention tests
#   tools/cuda_device_check.sh reference   test_cuda_reference_logits on the models of
#                                          $KARA_SHARED, else shared/ inside the tree
#   tools/cuda_device_check.sh bench       kara bench --device cuda on the Qwen3-0.6B and
#                                          1.7B shapes (models built in a scratch folder):
#                                          decode at depth 0 and 4096, with and without
#                                          CUDA graphs, tokens/s and GB/s against the card
#   tools/cuda_device_check.sh all         the three, in order
#   tools/cuda_device_check.sh prepare     (on the host, before a loan) copy ../shared's
#                                          models and reference into shared/ so they travel
#
# Each step checks first that a GPU answers and that its driver is new
# enough for the toolkit, and exits non-zero, saying which, if not. A test
# that skips (exit 77) is a failure here, never a pass. Only small files go
# to $OUT (default cuda-check/): summary.txt and results.jsonl (one JSON
# object per check); build logs and models stay in $KARA_CHECK_SCRATCH
# (default ${TMPDIR:-/tmp}/kara-cuda-check). The build folder is
# $KARA_CUDA_BUILD (default build-cuda), the architectures $KARA_CUDA_ARCHS
# (default: the GPU's compute capability), the bench's model shapes
# $KARA_CHECK_PRESETS (default "qwen3-0.6b qwen3-1.7b"; kara gen-model presets).
#
# Exit status: 0 all passed; 1 a test failed; 2 the build failed; 3 no GPU;
# 4 the driver is too old for the toolkit; 5 a test skipped; 6 the
# reference data is missing; 64 usage.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 70
root=$(pwd)
out=${OUT:-cuda-check}
scratch=${KARA_CHECK_SCRATCH:-${TMPDIR:-/tmp}/kara-cuda-check}
bdir=${KARA_CUDA_BUILD:-build-cuda}
mkdir -p "$out" "$scratch"
summary="$out/summary.txt"
results="$out/results.jsonl"
step=${1:-}
status=0

say() { echo "$*" | tee -a "$summary"; }

# One JSON line: step, check, result, seconds, detail.
record() {
    local detail=${5//\\/\\\\}
    detail=${detail//\"/\\\"}
    printf '{"step":"%s","check":"%s","result":"%s","seconds":%s,"detail":"%s"}\n' "$1" "$2" "$3" "$4" "$detail" \
        >>"$results"
}

# Keep the status that says most about the machine: no GPU, then an old
# driver, missing data, a failed build, a skip, a failed test.
rank() {
    case "$1" in
    3) echo 6 ;; 4) echo 5 ;; 6) echo 4 ;; 2) echo 3 ;; 5) echo 2 ;; 1) echo 1 ;; *) echo 0 ;;
    esac
}
fail() {
    say "FAIL: $2"
    if [ "$(rank "$1")" -gt "$(rank "$status")" ]; then status=$1; fi
}

# The GPU and its driver: nvidia-smi must list a GPU, and the driver must
# be at least the toolkit's minimum (CUDA 13 needs 580, CUDA 12 525). The
# tests' own probe (cudaGetDeviceCount) is the final word: a test that
# skips because the driver is older than the runtime is reported as such.
preflight() {
    local smi drv cuda_major need
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        fail 3 "no GPU: nvidia-smi is not installed"
        return 1
    fi
    if ! smi=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1) || [ -z "$smi" ]; then
        fail 3 "no GPU: nvidia-smi found none (${smi:-no output})"
        return 1
    fi
    say "GPU: $(echo "$smi" | head -1)"
    drv=$(echo "$smi" | head -1 | awk -F', ' '{print $2}' | cut -d. -f1)
    cuda_major=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
    case "$cuda_major" in
    13) need=580 ;;
    12) need=525 ;;
    *) need=0 ;;
    esac
    if [ -n "$drv" ] && [ "$need" -gt 0 ] && [ "$drv" -lt "$need" ]; then
        fail 4 "driver $drv is too old for CUDA $cuda_major (needs $need or newer)"
        return 1
    fi
    archs=${KARA_CUDA_ARCHS:-$(echo "$smi" | head -1 | awk -F', ' '{print $3}' | tr -d '. ')}
    return 0
}

# Configure and build only what the steps run: the CLI and the CUDA tests.
build_targets() {
    local t0=$SECONDS targets=(kara_cli "$@")
    say "== build ${targets[*]} for sm_${archs:-90} in $bdir"
    if ! cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DKARA_CUDA=ON -DKARA_WERROR=ON \
        -DKARA_CUDA_ARCHS="${archs:-90}" >"$scratch/configure.log" 2>&1; then
        tail -20 "$scratch/configure.log" | tee -a "$summary"
        record "$step" configure fail $((SECONDS - t0)) "cmake configure failed"
        fail 2 "configure failed (log: $scratch/configure.log)"
        return 1
    fi
    if ! cmake --build "$bdir" -j"$(nproc)" --target "${targets[@]}" >"$scratch/build.log" 2>&1; then
        grep -E "error|warning" "$scratch/build.log" | head -30 | tee -a "$summary"
        record "$step" build fail $((SECONDS - t0)) "build failed"
        fail 2 "build failed (log: $scratch/build.log)"
        return 1
    fi
    record "$step" build pass $((SECONDS - t0)) "${targets[*]}"
}

# Run one test binary (under a wrapper such as compute-sanitizer when
# given): exit 0 passes, 77 is a skip and fails the step, anything else
# fails. The last lines of a failing or skipping test go to the summary.
run_test() {
    local name=$1 bin=$2 limit=$3
    shift 3
    local log="$scratch/$name.log" t0=$SECONDS rc
    if [ ! -x "$bin" ]; then
        record "$step" "$name" fail 0 "$bin not built"
        fail 1 "$name: $bin was not built"
        return
    fi
    timeout "$limit" "$@" "$bin" >"$log" 2>&1
    rc=$?
    local secs=$((SECONDS - t0)) last
    last=$(grep -v '^ok' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        record "$step" "$name" pass "$secs" "$last"
        say "pass: $name (${secs}s)"
    elif [ "$rc" -eq 77 ]; then
        record "$step" "$name" skip "$secs" "$last"
        grep -v '^ok' "$log" | tail -5 | tee -a "$summary"
        if grep -q "driver version is insufficient" "$log"; then
            fail 4 "$name skipped: the driver is too old for this CUDA runtime"
        elif grep -q "no CUDA device" "$log"; then
            fail 3 "$name skipped: no CUDA device answered"
        else
            fail 5 "$name skipped (a skip is not a pass)"
        fi
    else
        [ "$rc" -eq 124 ] && last="timed out after ${limit}s"
        record "$step" "$name" fail "$secs" "exit $rc: $last"
        grep -v '^ok' "$log" | tail -20 | tee -a "$summary"
        fail 1 "$name failed (exit $rc)"
    fi
}

step_build() {
    build_targets test_cuda_matmul test_cuda_ops test_cuda_score test_cuda_graphs test_cuda_reference_logits || return
    local t
    for t in test_cuda_matmul test_cuda_ops test_cuda_score test_cuda_graphs; do
        run_test "$t" "$bdir/tests/$t" 300
    done
    local cs
    cs=$(command -v compute-sanitizer || echo "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/compute-sanitizer")
    if [ ! -x "$cs" ]; then
        record "$step" memcheck fail 0 "compute-sanitizer not found"
        fail 1 "compute-sanitizer not found (looked for $cs)"
        return
    fi
    # the kernels' tests without their slowest cases (KARA_CUDA_TEST_QUICK):
    # memcheck runs many times slower
    for t in test_cuda_score test_cuda_ops; do
        run_test "memcheck-$t" "$bdir/tests/$t" 300 env KARA_CUDA_TEST_QUICK=1 "$cs" --tool memcheck --error-exitcode 9 \
            --leak-check no
    done
}

step_reference() {
    local shared=${KARA_SHARED:-$root/shared}
    if [ ! -d "$shared/reference" ] || [ ! -d "$shared/models" ]; then
        record "$step" reference-data fail 0 "no $shared/reference or $shared/models"
        fail 6 "reference data missing: $shared/reference and $shared/models (run '$0 prepare' before the loan, or set KARA_SHARED)"
        return
    fi
    build_targets test_cuda_reference_logits || return
    export KARA_SHARED=$shared
    run_test test_cuda_reference_logits "$bdir/tests/test_cuda_reference_logits" 420
}

step_bench() {
    build_targets || return
    local k="$bdir/bin/kara" preset m jobs
    jobs=$(nproc)
    for preset in ${KARA_CHECK_PRESETS:-qwen3-0.6b qwen3-1.7b}; do
        m="$scratch/$preset-q4km.gguf"
        local t0=$SECONDS
        if ! "$k" gen-model --preset "$preset" --arch qwen3 --type Q4_K_M -o "$m" >"$scratch/gen-$preset.log" 2>&1; then
            record "$step" "gen-$preset" fail $((SECONDS - t0)) "$(tail -1 "$scratch/gen-$preset.log")"
            fail 1 "gen-model $preset failed"
            continue
        fi
        # decode at depth 0 and 4096, each launching kernel by kernel and as
        # a CUDA graph (KARA_CUDA_GRAPHS=1); then the CPU for scale
        local args graphs
        for args in "0 --device cuda -p 512 -n 128 -r 3" "1 --device cuda -p 0 -n 128 -r 3" \
            "0 --device cuda -p 0 -n 128 -d 4096 -r 2" "1 --device cuda -p 0 -n 128 -d 4096 -r 2" \
            "0 -t $jobs -p 512 -n 128 -r 2"; do
            graphs=${args%% *}
            args=${args#* }
            t0=$SECONDS
            # shellcheck disable=SC2086
            if KARA_CUDA_GRAPHS=$graphs "$k" bench -m "$m" $args >>"$out/bench.jsonl" 2>"$scratch/bench.err"; then
                record "$step" "bench $preset $args" pass $((SECONDS - t0)) ""
            else
                record "$step" "bench $preset $args" fail $((SECONDS - t0)) "$(tail -1 "$scratch/bench.err")"
                local why=1
                grep -q "driver version is insufficient" "$scratch/bench.err" && why=4
                fail "$why" "bench $preset $args failed: $(tail -1 "$scratch/bench.err")"
            fi
        done
        rm -f "$m"
    done
    [ -f "$out/bench.jsonl" ] || return
    cat "$out/bench.jsonl"
    # the decode lines in a line each: tokens/s, GB/s of weights, share of the card's peak
    python3 - "$out/bench.jsonl" <<'PY' 2>/dev/null | tee -a "$summary"
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o.get("device") == "cuda" and o["test"].startswith("tg"):
        print("decode %s d%d%s: %.1f tok/s, %.1f GB/s, %.1f%% of %.0f GB/s (%s)" % (
            o["model"], o["depth"], " graphs" if o.get("cuda_graphs") else "", o["tok_s_median"], o["gb_s"],
            100 * o["bw_frac"], o["peak_gb_s"], o["gpu"]))
PY
}

step_prepare() {
    local from=${KARA_SHARED:-$root/../shared}
    if [ ! -d "$from/reference" ]; then
        echo "prepare: $from/reference not found" >&2
        exit 6
    fi
    mkdir -p shared # ignored (.gitignore); the device tool carries shared/ all the same
    cp -r "$from/reference" "$from/models" shared/
    du -sh shared
    exit 0
}

case "$step" in
build | reference | bench)
    : >"$summary"
    say "== cuda_device_check $step ($(date -u +%FT%TZ))"
    if preflight; then "step_$step"; fi
    ;;
all)
    : >"$summary"
    say "== cuda_device_check all ($(date -u +%FT%TZ))"
    if preflight; then
        for step in build reference bench; do step_"$step"; done
    fi
    ;;
prepare) step_prepare ;;
*)
    echo "usage: $0 build|reference|bench|all|prepare (see the comment at the top)" >&2
    exit 64
    ;;
esac
if [ "$status" -eq 0 ]; then say "RESULT: all checks passed"; else say "RESULT: failed (exit $status)"; fi
exit "$status"
