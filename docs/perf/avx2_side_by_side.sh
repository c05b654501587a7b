#!/bin/bash
# Kara's AVX2 table against llama.cpp's Haswell backend (AVX2/FMA/F16C, no AVX-512), alternated:
#   docs/perf/avx2_side_by_side.sh KARA MODEL.gguf HSW_DIR ROUNDS
# HSW_DIR holds only libggml-cpu-haswell.so from llamacpp-ref's cache ($KARA_REF_CACHE or
# ~/.cache/kara-llamacpp-ref, linux-x64/bins/linux-x64/); run ../shared/bench/llamacpp-ref once first
# so that the harness is compiled. Output: one JSON line per program and round, and membw.
K=${1:?kara}; M=${2:?model}; H=${3:?haswell dir}; R=${4:-3}
C=${KARA_REF_CACHE:-$HOME/.cache/kara-llamacpp-ref}
date -u; $K bench --membw -t 1 2>&1 | tail -1
for r in $(seq 1 "$R"); do
  echo "# round $r $(date -u +%T) load=$(cut -d' ' -f1 /proc/loadavg)"
  KARA_CPU_ISA=avx2 $K bench -m "$M" -t 1 -p 512 -n 128 -r 3 2>/dev/null | grep -E '"pp|"tg'
  GGML_BACKEND_DIR=$H LD_LIBRARY_PATH=$C/linux-x64/bins/linux-x64 $C/llamacpp_ref "$M" -t 1 -p 512 -n 128 -r 3 2>/dev/null
done
date -u; $K bench --membw -t 1 2>&1 | tail -1
