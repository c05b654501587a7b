#!/bin/bash
# Kara and llama.cpp side by side on the same GGUF files, alternating the two
# programs in random order for every configuration, appending both programs'
# JSON lines (and a "#" line with the time and load) to one file; then
#   python3 tools/perf_table.py OUT.jsonl
# prints the table of docs/PERFORMANCE.md.
#
#   tools/bench/side_by_side.sh KARA_BIN MODEL_DIR OUT.jsonl [quick]
# MODEL_DIR holds qwen3-{0.6b,1.7b}-{Q4_K_M,Q4_0,Q8_0}.gguf, made with
#   kara gen-model --preset qwen3-0.6b --arch qwen3 --type Q4_K_M -o DIR/qwen3-0.6b-Q4_K_M.gguf
set -eu
K=$1 dir=$2 out=$3 quick=${4:-}
L=${KARA_SHARED:-$(dirname "$0")/../../../shared}/bench/llamacpp-ref
[ -x "$L" ] || { echo "side_by_side.sh: llamacpp-ref not found at $L" >&2; exit 2; }
run() { # model threads args...
    local m=$1 t=$2; shift 2
    echo "# $(date -u +%FT%TZ) load=$(cut -d' ' -f1 /proc/loadavg) $m t=$t $*" >> "$out"
    if [ $((RANDOM % 2)) = 0 ]; then
        "$L" "$dir/$m.gguf" -t "$t" "$@" 2>/dev/null >> "$out"; "$K" bench -m "$dir/$m.gguf" -t "$t" "$@" 2>/dev/null >> "$out"
    else
        "$K" bench -m "$dir/$m.gguf" -t "$t" "$@" 2>/dev/null >> "$out"; "$L" "$dir/$m.gguf" -t "$t" "$@" 2>/dev/null >> "$out"
    fi
}
models="qwen3-0.6b-Q4_K_M qwen3-0.6b-Q4_0 qwen3-0.6b-Q8_0 qwen3-1.7b-Q4_K_M qwen3-1.7b-Q4_0 qwen3-1.7b-Q8_0"
reps=2
[ -n "$quick" ] && reps=1
for t in 1 2; do
    for m in $models; do run "$m" "$t" -p 512 -n 128 -r "$reps"; done
done
for t in 1 2; do run qwen3-0.6b-Q4_K_M "$t" -p 0 -n 32 -d 4096 -r 1; done
echo "# done $(date -u +%FT%TZ)" >> "$out"
