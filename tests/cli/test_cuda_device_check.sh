#!/usr/bin/env bash
# tools/cuda_device_check.sh cannot report success when nothing ran: with
# stubs in place of the GPU tools (nvidia-smi, nvcc, cmake,
# compute-sanitizer and the test binaries), each step exits non-zero and
# names why: no GPU (3), a driver too old for the toolkit (4), a test that
# skipped (5, or 4 / 3 when the skip says the driver or the device is the
# reason), missing reference data (6); a failing test fails the step (1);
# only when every stub test passes does it exit 0. The bench step runs
# decode at depth 0 and 4096 with and without CUDA graphs on both shapes,
# summarises tokens/s and GB/s, and fails when the device's bench fails.
# Only small files are written to $OUT.
set -u
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stub="$tmp/stub"
mkdir -p "$stub" "$tmp/build/tests" "$tmp/build/bin"

# nvidia-smi: none answering, then an old driver, then a new one
smi() { printf '#!/bin/sh\n%s\n' "$1" >"$stub/nvidia-smi" && chmod +x "$stub/nvidia-smi"; }
printf '#!/bin/sh\necho "Cuda compilation tools, release 13.0, V13.0.48"\n' >"$stub/nvcc"
printf '#!/bin/sh\nexit 0\n' >"$stub/cmake"
printf '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift 2; done\nexec "$@"\n' >"$stub/compute-sanitizer"
chmod +x "$stub"/*
# a device test that prints $1 and exits $2
fake_test() { printf '#!/bin/sh\necho "%s"\nexit %s\n' "$2" "$3" >"$tmp/build/tests/$1" && chmod +x "$tmp/build/tests/$1"; }

run() { # step, then the exit status and the summary in $rc / $sum
    rm -rf "$tmp/out"
    PATH="$stub:$PATH" OUT="$tmp/out" KARA_CHECK_SCRATCH="$tmp/scratch" KARA_CUDA_BUILD="$tmp/build" \
        KARA_SHARED="${shared:-$tmp/none}" bash "$SRC/tools/cuda_device_check.sh" "$1" >"$tmp/stdout" 2>&1
    rc=$?
    sum=$(cat "$tmp/out/summary.txt" 2>/dev/null)
}

smi 'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver"; exit 9'
for s in build reference bench all; do
    run "$s"
    check "$s without a GPU exits 3 (rc $rc)" '[ $rc -eq 3 ]'
    check "$s says no GPU" 'printf "%s" "$sum" | grep -q "FAIL: no GPU: nvidia-smi found none"'
    check "$s never says passed" '! printf "%s" "$sum" | grep -q "all checks passed"'
done

smi 'echo "NVIDIA H100 80GB HBM3, 535.104.05, 9.0"'
run build
check "an old driver exits 4 (rc $rc)" '[ $rc -eq 4 ]'
check "and says so" 'printf "%s" "$sum" | grep -q "FAIL: driver 535 is too old for CUDA 13 (needs 580 or newer)"'

smi 'echo "NVIDIA H100 80GB HBM3, 590.10, 9.0"'
run reference
check "missing reference data exits 6 (rc $rc)" '[ $rc -eq 6 ]'
check "and names the folder" 'printf "%s" "$sum" | grep -q "FAIL: reference data missing: $tmp/none/reference"'

# the runtime refuses the driver: every test skips, as with the static CUDA 13 runtime on an older driver
for t in test_cuda_matmul test_cuda_ops test_cuda_score test_cuda_graphs; do
    fake_test $t "$t: skipped: no CUDA device (CUDA driver version is insufficient for CUDA runtime version)" 77
done
run build
check "tests skipping for the driver exit 4 (rc $rc)" '[ $rc -eq 4 ]'
check "the summary names the skip" \
    'printf "%s" "$sum" | grep -q "FAIL: test_cuda_matmul skipped: the driver is too old for this CUDA runtime"'
check "results.jsonl records it as a skip, not a pass" \
    'grep -q "\"check\":\"test_cuda_matmul\",\"result\":\"skip\"" "$tmp/out/results.jsonl"'
fake_test test_cuda_ops "test_cuda_ops: skipped: something else" 77
fake_test test_cuda_matmul "test_cuda_matmul: all passed" 0
fake_test test_cuda_score "test_cuda_score: all passed" 0
fake_test test_cuda_graphs "test_cuda_graphs: all passed" 0
run build
check "any other skip exits 5 (rc $rc)" '[ $rc -eq 5 ]'
check "and is named" 'printf "%s" "$sum" | grep -q "FAIL: test_cuda_ops skipped (a skip is not a pass)"'
fake_test test_cuda_ops "test_cuda_ops: FAIL attention" 1
run build
check "a failing test exits 1 (rc $rc)" '[ $rc -eq 1 ]'
check "memcheck ran on the scorer and attention tests" \
    'grep -q "\"check\":\"memcheck-test_cuda_score\",\"result\":\"pass\"" "$tmp/out/results.jsonl" &&
     grep -q "\"check\":\"memcheck-test_cuda_ops\",\"result\":\"fail\"" "$tmp/out/results.jsonl"'
fake_test test_cuda_ops "test_cuda_ops: all passed" 0
run build
check "all stub tests passing exit 0 (rc $rc)" '[ $rc -eq 0 ] && printf "%s" "$sum" | grep -q "RESULT: all checks passed"'
check "only the summary and the JSON lines in OUT" '[ "$(ls "$tmp/out" | tr "\n" " ")" = "results.jsonl summary.txt " ]'

mkdir -p "$tmp/shared/reference" "$tmp/shared/models"
fake_test test_cuda_reference_logits "SKIPPED test_cuda_reference_logits: ../shared (or \$KARA_SHARED) not found" 77
shared="$tmp/shared" run reference
check "a skipped reference test exits 5 (rc $rc)" '[ $rc -eq 5 ]'

# bench: a stub kara that builds empty models and prints the bench's lines
# (tg lines with GB/s on the device, marked when KARA_CUDA_GRAPHS=1), or
# fails the device as a machine without a usable GPU does (STUB_FAIL=1)
cat >"$tmp/build/bin/kara" <<'SH'
#!/bin/sh
if [ "$1" = gen-model ]; then
    while [ $# -gt 0 ]; do [ "$1" = -o ] && : >"$2"; shift; done
    exit 0
fi
echo "$KARA_CUDA_GRAPHS $*" >>"$STUB_LOG"
case " $* " in *" --device cuda "*) ;; *)
    echo '{"engine":"kara","model":"m.gguf","test":"tg128","threads":16,"depth":0,"reps":2,"tok_s_median":50.00,"tok_s_min":49.00,"tok_s_max":51.00}'
    exit 0 ;;
esac
if [ -n "${STUB_FAIL:-}" ]; then
    echo "kara bench: --device cuda: no CUDA device answers (no GPU, or its driver is missing or too old)" >&2
    exit 69
fi
d=0; case " $* " in *" -d 4096 "*) d=4096 ;; esac
g=""; [ "${KARA_CUDA_GRAPHS:-}" = 1 ] && g=',"cuda_graphs":true'
echo "{\"engine\":\"kara\",\"model\":\"m.gguf\",\"test\":\"tg128\",\"threads\":4,\"depth\":$d,\"reps\":3,\"tok_s_median\":300.00,\"tok_s_min\":290.00,\"tok_s_max\":310.00,\"device\":\"cuda\"$g,\"gpu\":\"NVIDIA H100 80GB HBM3\",\"weight_bytes\":1000000000,\"gb_s\":300.00,\"peak_gb_s\":3352.3,\"bw_frac\":0.0895}"
SH
chmod +x "$tmp/build/bin/kara"
export STUB_LOG="$tmp/bench-calls"
: >"$STUB_LOG"
run bench
check "bench with every run passing exits 0 (rc $rc)" '[ $rc -eq 0 ] && printf "%s" "$sum" | grep -q "RESULT: all checks passed"'
check "bench: depth 0 and 4096, with and without graphs, for both shapes, and the CPU" \
    '[ "$(grep -c "^0 bench -m .* --device cuda -p 0 -n 128 -d 4096 -r 2$" "$STUB_LOG")" = 2 ] &&
     [ "$(grep -c "^1 bench -m .* --device cuda -p 0 -n 128 -d 4096 -r 2$" "$STUB_LOG")" = 2 ] &&
     [ "$(grep -c "^1 bench -m .* --device cuda -p 0 -n 128 -r 3$" "$STUB_LOG")" = 2 ] &&
     [ "$(grep -c "^0 bench -m .* -t [0-9]* -p 512" "$STUB_LOG")" = 2 ] &&
     [ "$(grep -c "qwen3-1.7b-q4km.gguf" "$STUB_LOG")" = 5 ]'
check "bench: the summary gives decode tok/s and GB/s against the card" \
    'printf "%s" "$sum" | grep -q "decode m.gguf d4096 graphs: 300.0 tok/s, 300.0 GB/s, 8.9% of 3352 GB/s (NVIDIA H100 80GB HBM3)"'
check "bench: OUT holds the JSON lines and the summary only, the models are gone" \
    '[ "$(ls "$tmp/out" | tr "\n" " ")" = "bench.jsonl results.jsonl summary.txt " ] && [ ! -e "$tmp/scratch/qwen3-0.6b-q4km.gguf" ]'
STUB_FAIL=1 run bench
check "bench with the device failing exits 1 (rc $rc)" '[ $rc -eq 1 ] && ! printf "%s" "$sum" | grep -q "all checks passed"'
check "and names the run and the reason" \
    'printf "%s" "$sum" | grep -q "FAIL: bench qwen3-0.6b --device cuda -p 512 -n 128 -r 3 failed: kara bench: --device cuda: no CUDA device answers"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
