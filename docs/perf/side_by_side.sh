#!/bin/bash
# Issue 20's side-by-side in one run: Kara (`kara bench`) and llama.cpp
# (../shared/bench/llamacpp-ref, its prebuilt CPU library) on the same
# files, alternated per configuration, ROUNDS rounds (default 2):
#   - Qwen3-0.6B and 1.7B shapes (random weights, Q4_K_M), -t 1 and -t 2:
#     prefill pp512 and decode tg128;
#   - decode at depth 4096 (tg32 after 4096 cached tokens), 0.6B, -t 1,
#     with an f16 KV cache and with a q8_0 one (tagged "kv":"q8_0");
#   - AVX2 only, 0.6B, -t 1: KARA_CPU_ISA=avx2 against llama.cpp restricted
#     to its Haswell backend (a folder holding only libggml-cpu-haswell.so).
# First `kara bench --membw` at 1 and 2 threads (the wall decode is measured
# against). One JSON line per test, tagged with the round and, for
# llama.cpp, "engine":"llama.cpp" (its harness prints that) and the ISA.
#   usage: LLAMACPP_REF=../shared/bench/llamacpp-ref docs/perf/side_by_side.sh KARA_BIN Q06.gguf Q17.gguf > OUT.jsonl
# (q06/q17: kara gen-model --preset qwen3-0.6b|qwen3-1.7b --arch qwen3 --type Q4_K_M -o FILE)
# tools/bench/side_by_side.sh is the broader sweep (Q4_0 and Q8_0 files too,
# random order per configuration, one pass); this one is issue 20's set in
# whole rounds, with the bandwidth wall and the AVX2 pair.
set -u
K=${1:?kara binary}
Q06=${2:?the 0.6B-shape GGUF}
Q17=${3:?the 1.7B-shape GGUF}
REF=${LLAMACPP_REF:?set LLAMACPP_REF to ../shared/bench/llamacpp-ref}
ROUNDS=${ROUNDS:-2}
"$REF" "$Q06" -t 1 -p 8 -n 8 -r 1 > /dev/null 2>&1 # fetch and build the harness once
CACHE=${KARA_REF_CACHE:-$HOME/.cache/kara-llamacpp-ref}
HASWELL=$(mktemp -d)
ln -s "$CACHE/linux-x64/bins/linux-x64/libggml-cpu-haswell.so" "$HASWELL/"
tag() { sed "s/}\$/,\"round\":$1$2}/"; }
for t in 1 2; do "$K" bench --membw -t $t | tag 0 ""; done
for r in $(seq 1 "$ROUNDS"); do
    for f in "$Q06" "$Q17"; do
        for t in 1 2; do
            "$K" bench -m "$f" -t $t -p 512 -n 128 -r 2 2> /dev/null | grep -v '"test":"load"' | tag "$r" ""
            "$REF" "$f" -t $t -p 512 -n 128 -r 2 2> /dev/null | tag "$r" ""
        done
    done
    "$K" bench -m "$Q06" -t 1 -p 0 -n 32 -d 4096 -r 2 2> /dev/null | grep -v '"test":"load"' | tag "$r" ""
    "$K" bench -m "$Q06" -t 1 -p 0 -n 32 -d 4096 -r 2 -ctk q8_0 -ctv q8_0 2> /dev/null | grep -v '"test":"load"' |
        tag "$r" ",\"kv\":\"q8_0\""
    "$REF" "$Q06" -t 1 -p 0 -n 32 -d 4096 -r 2 2> /dev/null | tag "$r" ""
    KARA_CPU_ISA=avx2 "$K" bench -m "$Q06" -t 1 -p 512 -n 128 -r 2 2> /dev/null | grep -v '"test":"load"' |
        tag "$r" ",\"isa\":\"avx2\""
    GGML_BACKEND_DIR="$HASWELL" "$CACHE/llamacpp_ref" "$Q06" -t 1 -p 512 -n 128 -r 2 2> /dev/null |
        tag "$r" ",\"isa\":\"avx2\""
done
rm -rf "$HASWELL"
