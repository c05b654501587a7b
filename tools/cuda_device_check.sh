#!/usr/bin/env bash
# The CUDA backend's checks on a machine with an NVIDIA GPU (issue 21), as
# one script for a short device loan (docs/CUDA.md, "Checking on a GPU"):
#   1. build with the backend for this GPU only (KARA_CUDA_ARCHS, default:
#      what nvidia-smi reports), warnings as errors;
#   2. the device tests: ctest -L cuda (each kernel against the scalar CPU
#      reference; whole-model logits against ../shared/reference when
#      KARA_SHARED or ../shared holds it);
#   3. kara bench --device cuda on the Qwen3-0.6B and 1.7B shapes (random
#      weights from kara gen-model, Q4_K_M), pp512 and tg128, and the CPU
#      on the same files for scale.
# Everything lands in $OUT (default cuda-check/); exit status: the tests'.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-cuda-check}
mkdir -p "$out"
jobs=$(nproc)
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$out/nvidia-smi.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
archs=${KARA_CUDA_ARCHS:-${cc:-90}}
echo "== build for sm_$archs"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DKARA_CUDA=ON -DKARA_WERROR=ON -DKARA_CUDA_ARCHS="$archs" \
    >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-cuda -j"$jobs" >"$out/build.log" 2>&1 || { grep -E "error|warning" "$out/build.log" | head -40; exit 1; }

echo "== device tests"
(cd build-cuda && ctest -L cuda --output-on-failure) >"$out/ctest-cuda.log" 2>&1
rc=$?
tail -20 "$out/ctest-cuda.log"

echo "== kara bench --device cuda"
K=build-cuda/bin/kara
for preset in qwen3-0.6b qwen3-1.7b; do
    m="$out/$preset-q4km.gguf"
    "$K" gen-model --preset "$preset" --arch qwen3 --type Q4_K_M -o "$m" >/dev/null 2>>"$out/bench.err" || continue
    "$K" bench -m "$m" --device cuda -p 512 -n 128 -r 3 >>"$out/bench.jsonl" 2>>"$out/bench.err"
    "$K" bench -m "$m" --device cuda -p 0 -n 128 -d 4096 -r 2 >>"$out/bench.jsonl" 2>>"$out/bench.err"
    "$K" bench -m "$m" -t "$jobs" -p 512 -n 128 -r 2 >>"$out/bench.jsonl" 2>>"$out/bench.err"
    rm -f "$m"
done
cat "$out/bench.jsonl" 2>/dev/null
tail -5 "$out/bench.err" 2>/dev/null
exit $rc
