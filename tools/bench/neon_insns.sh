#!/usr/bin/env bash
# Instructions of one NEON matmul, file layout against the interleaved one,
# counted under qemu-aarch64 (one instruction per translation block, each
# execution logged): the speed proxy of kernels this x86 machine cannot time.
#   tools/bench/neon_insns.sh [BUILD_DIR] [CPU]   (after tools/ci_neon.sh BUILD_DIR; CPU default max)
# Prints, per type, shape and batch, the matmul's instructions (a run minus
# the same run without the matmul) and their ratio.
set -euo pipefail
build=${1:-build-aarch64}
cpu=${2:-max}
bin="$build/kara_kernel_insns"
[ -x "$bin" ] || { echo "neon_insns: $bin not found (run tools/ci_neon.sh $build first)" >&2; exit 1; }
count() { # TYPE LAYOUT ROWS COLS BATCH RUN: the log streams to a count, never to disk
    qemu-aarch64 -cpu "$cpu" -singlestep -d exec,nochain -D /dev/stderr "$bin" "$@" 2>&1 >/dev/null | grep -c '^Trace'
}
# F32 also in the shipped model's feed-forward shape (384 x 128)
for shape in Q4_0:256:1024 Q4_K:256:1024 Q6_K:256:1024 F32:256:1024 F32:384:128; do
    IFS=: read -r type rows cols <<<"$shape"
    for batch in 1 4; do
        f=$(($(count $type file $rows $cols $batch 1) - $(count $type file $rows $cols $batch 0)))
        x=$(($(count $type x16 $rows $cols $batch 1) - $(count $type x16 $rows $cols $batch 0)))
        echo "$type ${rows}x${cols} batch $batch on $cpu: file layout $f instructions, x16 $x ($(awk "BEGIN{printf \"%.2f\", $f / $x}")x fewer)"
    done
done
