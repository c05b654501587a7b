#!/usr/bin/env bash
# Cross-compiles the CPU kernels and the kernel tests for aarch64 (NEON, and
# the SDOT variants) and runs the tests under qemu-aarch64: once with the
# emulator's default CPU (which has dotprod) and once as a Cortex-A53-class
# CPU without it, so both NEON tables are checked against the scalar one.
#   tools/ci_neon.sh [BUILD_DIR]      (default: build-aarch64)
# Needs gcc-aarch64-linux-gnu and qemu-user (tools/install_deps.sh --dev); skips
# with a message (exit 0) when they are missing, unless KARA_CI_STRICT=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-aarch64}
for tool in aarch64-linux-gnu-gcc qemu-aarch64 cmake; do
    if ! command -v "$tool" >/dev/null; then
        echo "ci_neon: $tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2
        [ "${KARA_CI_STRICT:-0}" = 1 ] && exit 1
        exit 0
    fi
done
cmake -S "$root" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
    -DKARA_KERNELS_ONLY=ON -DKARA_OPENMP=OFF -DCMAKE_BUILD_TYPE=Release -DKARA_WERROR=ON >/dev/null
make -C "$build" -j"${KARA_JOBS:-2}" --no-print-directory >/dev/null
tests=(test_kernel_parity test_quant_roundtrip test_gemm_nt test_attn_q8 test_repack)
status=0
for cpu in max cortex-a53; do
    for t in "${tests[@]}"; do
        [ -x "$build/$t" ] || continue
        if out=$(qemu-aarch64 -cpu "$cpu" "$build/$t" 2>&1); then
            echo "ci_neon: $t on $cpu: $(echo "$out" | tail -n 1)"
        else
            echo "$out" | tail -n 20
            echo "ci_neon: $t FAILED on $cpu" >&2
            status=1
        fi
    done
done
exit $status
