#!/usr/bin/env bash
# Cross-builds the whole project (libkara.a, the `kara` command, the tests)
# for aarch64 and runs it under qemu-aarch64: the unit tests that finish in
# seconds under emulation, and the README's chat with the project's
# reasoning model, which must answer 8976. tools/ci_neon.sh checks every
# NEON kernel against the scalar one; this checks that an ARM board gets the
# library and the command at all.
#   tools/ci_arm_full.sh [BUILD_DIR]      (default: build-aarch64-full)
# Needs gcc-aarch64-linux-gnu, qemu-user and libyaml-dev:arm64
# (tools/install_deps.sh --dev); skips with a message (exit 0) when they are
# missing, unless KARA_CI_STRICT=1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-aarch64-full}
missing=""
for tool in aarch64-linux-gnu-gcc qemu-aarch64 cmake; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
[ -f /usr/lib/aarch64-linux-gnu/libyaml.a ] || missing="$missing libyaml-dev:arm64"
if [ -n "$missing" ]; then
    echo "ci_arm_full: missing$missing (tools/install_deps.sh --dev installs them)" >&2
    [ "${KARA_CI_STRICT:-0}" = 1 ] && exit 1
    exit 0
fi
cmake -S "$root" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" -DKARA_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release -DKARA_WERROR=ON >/dev/null
# static glibc programs warn that dlopen (from libgomp) needs the same glibc at run time: true and harmless here
cmake --build "$build" -j"${KARA_JOBS:-2}" 2>&1 | grep -v "statically linked applications requires at runtime" || true
[ -x "$build/bin/kara" ] || { echo "ci_arm_full: the build failed" >&2; exit 1; }
readelf -h "$build/bin/kara" 2>/dev/null | grep -q AArch64 || { echo "ci_arm_full: bin/kara is not an aarch64 program" >&2; exit 1; }

# the slowest unit tests under emulation (minutes each: long batches through the scalar-speed emulator) are left to
# the native runs
(cd "$build" && ctest -L unit -E 'test_batch_engine|test_batch_one_sequence|test_kv_policy|test_kv_on_demand' \
    -j"${KARA_JOBS:-2}" --output-on-failure)

answer=$(printf 'Compute #1 24*88 + #2 78*88.\n' | qemu-aarch64 "$build/bin/kara" chat \
    -m "$root/tools/train/model/kara-reasoner-1m.gguf" --temp 0 2>/dev/null | grep -v '^$' | tail -1)
if [ "$answer" != 8976 ]; then
    echo "ci_arm_full: kara chat under qemu-aarch64 answered '$answer', not 8976" >&2
    exit 1
fi
echo "ci_arm_full: kara chat under qemu-aarch64 answers 8976"
