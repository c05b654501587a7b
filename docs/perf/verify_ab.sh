#!/bin/bash
# Alternated A/B of verify steps and decode at depth, 1 thread:
#   docs/perf/verify_ab.sh OLD_KARA NEW_KARA MODEL.gguf
# 2026-12-03: OLD = 1d7bc92 and NEW = the verify-step change, both built -DKARA_CUDA=OFF; MODEL from
# `kara gen-model --preset qwen3-0.6b --arch qwen3 --type Q4_K_M`. Output: verify_ab_2026-12-03.txt.
B=${1:?old kara binary}; N=${2:?new kara binary}; M=${3:?model}
date -u; $N bench --membw -t 1 2>&1 | tail -1
for r in 1 2 3; do for b in $B $N; do
  echo "== round $r $(dirname $(dirname $b))"
  $b bench -m $M -t 1 -p 0 -n 8 -d 512 -r 3 --verify 4 --verify 8 2>/dev/null | grep verify
  $b bench -m $M -t 1 -p 0 -n 16 -d 4096 -r 2 2>/dev/null | grep tg
done; done
date -u; $N bench --membw -t 1 2>&1 | tail -1
