#!/usr/bin/env bash
# `kara gen-model` and `kara quantize`: a model quantized from F32 is byte for
# byte the model generated directly in that type (same values, same reference
# quantizer, same metadata); the mixes place the types llama.cpp would; bad
# input gives the documented exit codes.
set -euo pipefail
kara=${KARA_BIN:?set KARA_BIN to the kara binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
check() {   # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
has_type() {   # has_type FILE TENSOR TYPE: the inspect table lists TENSOR with TYPE
    "$kara" inspect "$1" > "$dir/inspect.txt" && grep -Eq "^ +[0-9]+ +$2 +$3 " "$dir/inspect.txt"
}
exit_code() {  # exit_code WANT COMMAND...: the command exits with WANT
    local want=$1; shift
    local rc=0
    "$@" >/dev/null 2>&1 || rc=$?
    [ "$rc" = "$want" ]
}

"$kara" gen-model --preset tiny-k --arch qwen3 --seed 7 -o "$dir/f32.gguf"
"$kara" gen-model --preset tiny-k --arch qwen3 --seed 7 --type Q4_K_M -o "$dir/direct.gguf"
"$kara" quantize -q "$dir/f32.gguf" "$dir/quantized.gguf" Q4_K_M
check "quantize F32 -> Q4_K_M equals gen-model --type Q4_K_M" cmp -s "$dir/direct.gguf" "$dir/quantized.gguf"
# 4 layers: llama.cpp's more-bits layers are 2 and 3
check "attn_v of layer 0 is Q4_K" has_type "$dir/quantized.gguf" 'blk\.0\.attn_v\.weight' Q4_K
check "attn_v of layer 2 is Q6_K" has_type "$dir/quantized.gguf" 'blk\.2\.attn_v\.weight' Q6_K
check "ffn_down of layer 3 is Q6_K" has_type "$dir/quantized.gguf" 'blk\.3\.ffn_down\.weight' Q6_K
check "output.weight is Q6_K" has_type "$dir/quantized.gguf" 'output\.weight' Q6_K
check "norms stay F32" has_type "$dir/quantized.gguf" 'blk\.1\.attn_q_norm\.weight' F32
"$kara" inspect "$dir/quantized.gguf" > "$dir/inspect.txt"
check "general.file_type is 15 (Q4_K_M)" grep -Eq 'general\.file_type +uint32 +15$' "$dir/inspect.txt"

# F16 source, legacy type; a pure file keeps the output in the base type
"$kara" gen-model --preset tiny --arch llama --type F16 -o "$dir/f16.gguf"
"$kara" quantize -q "$dir/f16.gguf" "$dir/q8.gguf" Q8_0
"$kara" quantize -q --pure "$dir/f16.gguf" "$dir/q4pure.gguf" Q4_0
check "F16 -> Q8_0: attn_q is Q8_0" has_type "$dir/q8.gguf" 'blk\.0\.attn_q\.weight' Q8_0
check "F16 -> Q8_0: output stays Q8_0" has_type "$dir/q8.gguf" 'output\.weight' Q8_0
check "F16 -> Q4_0 --pure: output is Q4_0" has_type "$dir/q4pure.gguf" 'output\.weight' Q4_0
check "F16 -> Q4_0 --pure: token_embd is Q4_0" has_type "$dir/q4pure.gguf" 'token_embd\.weight' Q4_0

# rows of 172 (stories260K's ffn_down) cannot hold 32-blocks: F16, as llama.cpp
"$kara" gen-model --arch llama --layers 1 --hidden 64 --heads 8 --kv-heads 4 --ffn 172 --vocab 300 -o "$dir/odd.gguf"
"$kara" quantize -q "$dir/odd.gguf" "$dir/odd-q8.gguf" Q8_0
check "ffn_down with 172 columns falls back to F16" has_type "$dir/odd-q8.gguf" 'blk\.0\.ffn_down\.weight' F16
check "ffn_gate with 64 columns is Q8_0" has_type "$dir/odd-q8.gguf" 'blk\.0\.ffn_gate\.weight' Q8_0

check "quantize: missing input exits 66" exit_code 66 "$kara" quantize "$dir/none.gguf" "$dir/x.gguf" Q8_0
check "quantize: unknown type exits 64" exit_code 64 "$kara" quantize "$dir/f32.gguf" "$dir/x.gguf" Q3_K_XL
check "quantize: malformed input exits 65" exit_code 65 sh -c "head -c 1000 '$dir/f32.gguf' > '$dir/cut.gguf' && '$kara' quantize '$dir/cut.gguf' '$dir/x.gguf' Q8_0"
check "quantize: no half-written output left behind" test ! -e "$dir/x.gguf"
check "gen-model: unknown arch exits 64" exit_code 64 "$kara" gen-model --arch gpt9 -o "$dir/x.gguf"
check "gen-model: heads not a multiple of kv-heads exits 64" exit_code 64 "$kara" gen-model --kv-heads 3 -o "$dir/x.gguf"
check "gen-model: no output file exits 64" exit_code 64 "$kara" gen-model --preset tiny
check "gen-model: unwritable output exits 73" exit_code 73 "$kara" gen-model -o /nonexistent-dir/x.gguf

echo "$fails failed"
[ "$fails" = 0 ]
