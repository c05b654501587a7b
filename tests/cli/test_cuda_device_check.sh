#!/usr/bin/env bash
# tools/cuda_device_check.sh cannot report success when nothing ran: with
# stubs in place of the GPU tools (nvidia-smi, nvcc, cmake,
# compute-sanitizer and the test binaries), each step exits non-zero and
# names why: no GPU (3), a driver too old for the toolkit (4), a test that
# skipped (5, or 4 / 3 when the skip says the driver or the device is the
# reason), missing reference data (6); a failing test fails the step (1);
# only when every stub test passes does it exit 0. Only small files are
# written to $OUT.
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
for t in test_cuda_matmul test_cuda_ops test_cuda_score; do
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

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
