#!/bin/bash
# Issue 17's threads bar: `kara bench --compete` (a CPU-bound process pinned to
# CPU 0 for each run) at -t 1 and -t 2, alternated, three rounds, for
# stories260K, the shipped reasoning model and the Qwen3-0.6B shape (random
# weights, Q4_K_M); then the same without the competitor (idle). One JSON
# line per test, tagged with the round. With LLAMACPP_REF set (the path of
# ../shared/bench/llamacpp-ref), llama.cpp runs the same tests on stories260K
# and the 0.6B shape beside the same kind of competitor (a shell loop pinned
# to CPU 0 by taskset), tagged "compete":true; it cannot load the shipped
# model (its retention-prior tensors).
# The two tiny models' tests last 2-20 ms a call, inside one scheduler time
# slice, so they take 30 calls a test (-r 30); with 3 calls one call that
# shares the competitor's core decides the median. The 0.6B shape takes 3.
#   usage: docs/perf/threads_compete.sh KARA_BIN Q06.gguf > OUT.jsonl
K=${1:?kara binary}
Q=${2:?the 0.6B-shape GGUF (kara gen-model --preset qwen3-0.6b --arch qwen3 --type Q4_K_M -o q06.gguf)}
S=${KARA_SHARED:-$(dirname "$0")/../../../shared}/models/stories260K.gguf
M=$(dirname "$0")/../../tools/train/model/kara-reasoner-1m.gguf
"$K" bench --membw -t 2
for mode in --compete ""; do
    for r in 1 2 3; do
        for m in "$S:-p 128 -n 128 -r 30" "$M:-p 128 -n 128 -r 30" "$Q:-p 128 -n 32 -r 3"; do
            f=${m%%:*} args=${m#*:}
            for t in 1 2; do
                "$K" bench -m "$f" -t $t $args $mode 2>/dev/null | grep -v '"test":"load"' | sed "s/}\$/,\"round\":$r}/"
            done
            if [ -n "${LLAMACPP_REF:-}" ] && [ "$mode" = --compete ] && [ "$f" != "$M" ]; then
                taskset -c 0 bash -c 'while :; do :; done' &
                spin=$!
                for t in 1 2; do
                    "$LLAMACPP_REF" "$f" -t $t $args 2>/dev/null | sed "s/}\$/,\"compete\":true,\"round\":$r}/"
                done
                kill $spin
                wait $spin 2>/dev/null
            fi
        done
    done
done
