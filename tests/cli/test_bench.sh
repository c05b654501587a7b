#!/usr/bin/env bash
# `kara bench`: JSON lines in the shape of ../shared/bench/llamacpp-ref (one
# per test, tokens/s median <= max and >= min), depth and thread count echoed,
# a closing load line with peak memory; the micro-benchmark modes print their
# lines; bad flags are usage errors (64), a missing model is 66; --device
# cuda without a backend or a GPU is 69 with the reason.
set -euo pipefail
kara=${KARA_BIN:?set KARA_BIN to the kara binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
check() {   # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
exit_code() {  # exit_code WANT COMMAND...
    local want=$1; shift
    local rc=0
    "$@" >/dev/null 2>&1 || rc=$?
    [ "$rc" = "$want" ]
}
# every line parses, and min <= median <= max where a line has them
json_ok() {
    python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "tok_s_median" in o:
        assert o["tok_s_min"] <= o["tok_s_median"] <= o["tok_s_max"], o
        assert o["tok_s_min"] > 0, o
PY
}

"$kara" gen-model --preset tiny-k --arch qwen3 --type Q4_K_M -o "$dir/m.gguf"
"$kara" bench -m "$dir/m.gguf" -t 1 -p 32 -n 8 -r 2 > "$dir/out.jsonl"
check "three lines (pp, tg, load)" test "$(wc -l < "$dir/out.jsonl")" = 3
check "pp line in llamacpp-ref's shape" grep -Eq '^\{"engine":"kara","model":"m.gguf","test":"pp32","threads":1,"depth":0,"reps":2,"tok_s_median":[0-9.]+,"tok_s_min":[0-9.]+,"tok_s_max":[0-9.]+\}$' "$dir/out.jsonl"
check "tg line" grep -Eq '"test":"tg8","threads":1,"depth":0,"reps":2,' "$dir/out.jsonl"
check "load line with peak RSS" grep -Eq '"test":"load",.*"load_s":[0-9.]+,.*"peak_rss_mib":[0-9.]+' "$dir/out.jsonl"
check "every line is JSON, min <= median <= max" json_ok "$dir/out.jsonl"

"$kara" bench -m "$dir/m.gguf" -t 2 -p 0 -n 4 -d 40 -r 1 > "$dir/depth.jsonl"
check "depth and threads echoed, no pp line" grep -Eq '^\{"engine":"kara","model":"m.gguf","test":"tg4","threads":2,"depth":40,' "$dir/depth.jsonl"
check "depth run: two lines" test "$(wc -l < "$dir/depth.jsonl")" = 2

"$kara" bench -m "$dir/m.gguf" -t 1 -p 0 -n 4 -d 20 -r 1 --verify 2 --verify 5 > "$dir/verify.jsonl"
check "--verify: one line per K after tg" test "$(grep -c '"test":"verify' "$dir/verify.jsonl")" = 2
check "--verify line: step times at the depth and their ratio" grep -Eq '^\{"engine":"kara","model":"m.gguf","test":"verify5","threads":1,"depth":20,"reps":1,"step_ms_median":[0-9.]+,"one_token_step_ms_median":[0-9.]+,"cost_vs_one_token":[0-9.]+\}$' "$dir/verify.jsonl"
check "--verify takes 1..64" exit_code 64 "$kara" bench -m "$dir/m.gguf" --verify 65
check "--verify at most 4 times" exit_code 64 "$kara" bench -m "$dir/m.gguf" --verify 1 --verify 2 --verify 3 --verify 4 --verify 5

"$kara" bench -m "$dir/m.gguf" -t 2 -p 8 -n 4 -r 1 --compete > "$dir/compete.jsonl" 2> "$dir/compete.err"
check "--compete marks its lines" test "$(grep -c '"compete":true' "$dir/compete.jsonl")" = 2
check "--compete says so" grep -q "a busy process pinned to CPU 0" "$dir/compete.err"
check "--compete leaves no process behind" test "$(pgrep -c -f "bench -m $dir/m.gguf -t 2 -p 8 -n 4 -r 1 --compete" || true)" = 0

"$kara" bench --kernels Q8_0 -t 1 -p 4 > "$dir/kernels.jsonl"
check "kernel lines for each shape, batch 1 and 4" test "$(grep -c '"type":"Q8_0"' "$dir/kernels.jsonl")" = 14
check "kernel lines are JSON" json_ok "$dir/kernels.jsonl"

check "unknown flag is a usage error" exit_code 64 "$kara" bench -m "$dir/m.gguf" --frobnicate
check "bad -r is a usage error" exit_code 64 "$kara" bench -m "$dir/m.gguf" -r 0
check "no model is a usage error" exit_code 64 "$kara" bench
check "missing model file is 66" exit_code 66 "$kara" bench -m "$dir/none.gguf"

# --device cuda: exit 69 with the reason before the model is loaded (a CPU
# build: no backend; a CUDA build where no GPU answers: no device). Where a
# GPU answers, the tg line adds the GPU, the weight bytes a step reads, GB/s
# and the share of the card's peak (gb_s = weight_bytes * tok_s / 1e9).
if "$kara" run --help-all 2>/dev/null | grep -q -- "-ngl N is --device cuda"; then cuda_build=1; else cuda_build=0; fi
rc=0
"$kara" bench -m "$dir/m.gguf" -t 1 -p 0 -n 4 -r 1 --device cuda > "$dir/cuda.jsonl" 2> "$dir/cuda.err" || rc=$?
if [ "$cuda_build" = 0 ]; then
    check "--device cuda in a CPU build: exit 69 (rc $rc)" test "$rc" = 69
    check "--device cuda in a CPU build: says to rebuild" grep -q "^kara bench: --device cuda: this libkara was built without the CUDA backend: rebuild with -DKARA_CUDA=ON" "$dir/cuda.err"
elif [ "$rc" = 69 ]; then
    check "--device cuda without a usable GPU: says so" grep -q "^kara bench: --device cuda: no CUDA device answers" "$dir/cuda.err"
else
    check "--device cuda on a GPU: runs (rc $rc)" test "$rc" = 0
    check "--device cuda: tg line with GB/s against the card's peak" grep -Eq '"test":"tg4",.*"device":"cuda","gpu":"[^"]+","weight_bytes":[0-9]+,"gb_s":[0-9.]+,"peak_gb_s":[0-9.]+,"bw_frac":[0-9.]+\}$' "$dir/cuda.jsonl"
    check "--device cuda: gb_s is weight_bytes x tok/s" python3 - "$dir/cuda.jsonl" <<'PY'
import json, sys
o = [json.loads(l) for l in open(sys.argv[1]) if '"tg4"' in l][0]
assert abs(o["gb_s"] - o["weight_bytes"] * o["tok_s_median"] / 1e9) <= 0.01 + 1e-3 * o["gb_s"], o
assert o["peak_gb_s"] > 0 and abs(o["bw_frac"] - o["gb_s"] / o["peak_gb_s"]) < 1e-3, o
PY
    KARA_CUDA_GRAPHS=1 "$kara" bench -m "$dir/m.gguf" -t 1 -p 0 -n 4 -r 1 --device cuda > "$dir/graphs.jsonl" 2>/dev/null
    check "KARA_CUDA_GRAPHS=1: the lines say so" grep -q '"device":"cuda","cuda_graphs":true,"gpu":' "$dir/graphs.jsonl"
fi
if [ "$rc" = 69 ]; then
    check "--device cuda: 69 before the model is read (missing file)" exit_code 69 "$kara" bench -m "$dir/none.gguf" --device cuda
    check "--device cuda: nothing on stdout when it stops" test ! -s "$dir/cuda.jsonl"
fi

[ "$fails" = 0 ] && echo "all ok" || { echo "$fails failed"; exit 1; }
