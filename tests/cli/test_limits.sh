#!/usr/bin/env bash
# Limits and the messages that name them (issue 44): KV budget sizes (only
# auto is no cap; 0 and a fraction of a byte are refused, an exponent is a
# number), integer ranges printed as integers, the same top_k limits for
# --top-k and a request body, a NUL in a custom_id named, a UTF-8 byte
# order mark skipped with a note, a dotted YAML key beside its nested form
# refused, NaN logits a model error (65), an automatic KV pool larger than
# the machine refused with what fits, and the fit note that agrees with
# what then happens. Peak memory before a refusal: test_memory_bounds.sh.
set -u
. "$(dirname "$0")/lib/common.sh"
"$KARA" gen-model --preset tiny --arch qwen3 --type f32 -o "$tmp/m.gguf" >/dev/null 2>&1 || {
    echo "FAIL: gen-model"; exit 1; }
M="$tmp/m.gguf"

# --- KV budget sizes: below the smallest working budget is refused with that size
small="the smallest budget that works here is 396832 bytes (0.38 MiB): method kara reserves"
for b in 0.5 0.9B 1 396831; do
    expect_stderr "--kv-budget $b" 65 "too small: $small" "$KARA" run -m "$M" -p hi -n 2 --kv-budget "$b"
done
expect_stderr "--kv-budget at the smallest working size" 0 "generation: 2 tokens" \
    "$KARA" run -m "$M" -p hi -n 2 --kv-budget 396832
expect_stderr "--kv-budget 0" 64 \
    "kara run: --kv-budget: kv_cache.budget: '0' is 0 bytes, which holds nothing; give a size (auto: no limit)" \
    "$KARA" run -m "$M" -p hi -n 2 --kv-budget 0
printf 'kv_cache:\n  budget: 0\n' >"$tmp/b0.yaml"
expect_stderr "YAML kv_cache.budget: 0" 78 \
    "b0.yaml:2:11: kv_cache.budget: '0' is 0 bytes, which holds nothing; give a size (auto: no limit)" \
    "$KARA" run -m "$M" -p hi -n 2 --config "$tmp/b0.yaml"
printf 'kv_cache:\n  budget: 0.9B\n' >"$tmp/b09.yaml"
expect_stderr "YAML kv_cache.budget: 0.9B" 65 "too small: $small" "$KARA" run -m "$M" -p hi -n 2 --config "$tmp/b09.yaml"
expect_stderr "--kv-budget 1e30" 64 "kv_cache.budget: 1e30 is out of range (at most 1125899906842624 bytes)" \
    "$KARA" run -m "$M" -p hi -n 2 --kv-budget 1e30
"$KARA" run -m "$M" -p hi -n 2 --kv-budget 1.5e6 --print-config >"$tmp/pc" 2>&1
check "--kv-budget 1.5e6 is 1500000 bytes" "grep -q '^  budget: 1500KB ' '$tmp/pc'"

# --- the same top_k limits for the flag and a request body (-1 and 0: off)
expect_stderr "--top-k -1 is off" 0 "generation: 2 tokens" "$KARA" run -m "$M" -p hi -n 2 --top-k -1
expect_stderr "--top-k -2" 64 "kara run: --top-k: sampling.top_k: -2 is out of range [-1, 16777216]" \
    "$KARA" run -m "$M" -p hi -n 2 --top-k -2
msg='{"role":"user","content":"hi"}'
{
    printf '\xef\xbb\xbf{"custom_id":"k1","body":{"messages":[%s],"max_tokens":2,"top_k":-1}}\n' "$msg"
    printf '{"custom_id":"k2","body":{"messages":[%s],"top_k":-2}}\n' "$msg"
    printf '{"custom_id":"m","body":{"messages":[%s],"max_tokens":20000000}}\n' "$msg"
    printf '{"custom_id":"s","body":{"messages":[%s],"seed":1e30}}\n' "$msg"
    printf '{"custom_id":"n\\u0000x","body":{"messages":[%s]}}\n' "$msg"
} >"$tmp/req.jsonl"
expect_stderr "batch: a BOM is skipped with a note" 1 \
    "kara batch: $tmp/req.jsonl: skipping the UTF-8 byte order mark at its start" \
    "$KARA" batch -m "$M" -i "$tmp/req.jsonl" -o "$tmp/res.jsonl"
has() { grep -qF -- "$2" "$tmp/res.jsonl" || { echo "  missing in the output: $2"; return 1; }; }
check "batch: top_k -1 answered" "grep -q '\"custom_id\":\"k1\",\"response\":{\"status_code\":200' '$tmp/res.jsonl'"
check "batch: top_k -2 refused as the flag is" \
    "has k2 'top_k -2 is out of range [-1, 16777216] (the same limits as sampling.top_k)'"
check "batch: an integer range printed as integers" \
    "has m 'max_tokens 20000000 is out of range [1, 16777216]'"
check "batch: the seed range printed as integers" \
    "has s 'seed 1e+30 is out of range [-9223372036854775808, 18446744073709549568]'"
check "batch: a NUL in custom_id is named" \
    "has n 'custom_id \\\"n\\\\u0000x\\\" holds a NUL character (\\\\u0000) at byte 2; it must be a string without NUL'"
printf '{"custom_id":"caf\\u00e9","body":{"messages":[%s]}}\n{"custom_id":"caf\\u00e9","body":{"messages":[%s]}}\n' \
    "$msg" "$msg" >"$tmp/dup.jsonl"
expect_stderr "batch: a non-ASCII duplicate custom_id is named" 65 \
    "duplicate custom_id \"café\" (first on line 1, non-ASCII: \"caf\\u00e9\")" \
    "$KARA" batch -m "$M" -i "$tmp/dup.jsonl" -o "$tmp/dup-out.jsonl"

# --- a prompt file: a BOM is skipped with a note, and the text is the same
printf 'hello there' >"$tmp/p.txt"
printf '\xef\xbb\xbfhello there' >"$tmp/p-bom.txt"
"$KARA" tokenize -m "$M" -f "$tmp/p.txt" >"$tmp/t1" 2>/dev/null
expect_stderr "prompt file: a BOM is skipped with a note" 0 "kara tokenize: $tmp/p-bom.txt: skipping the UTF-8 byte order mark" \
    "$KARA" tokenize -m "$M" -f "$tmp/p-bom.txt"
check "prompt file: the same tokens without the BOM" "cmp -s '$tmp/t1' '$tmp/out'"

# --- YAML: a dotted key beside its nested form is one key given twice
printf 'sampling:\n  top_k: 5\nsampling.top_k: 7\n' >"$tmp/dup.yaml"
expect_stderr "YAML dotted duplicate" 78 \
    "dup.yaml:3:1: duplicate key 'sampling.top_k' (first given at line 2, column 3: a dotted key and its nested form are the same key)" \
    "$KARA" run -m "$M" -p hi --config "$tmp/dup.yaml"

# --- NaN weights: a model error, exit 65, not blanks and 0
line=$("$KARA" inspect "$M" | grep ' output_norm.weight ')
data=$("$KARA" inspect "$M" | sed -n 's/.*data at offset \([0-9]*\).*/\1/p')
off=$(($(awk '{print $NF}' <<<"$line") + data))
cp "$M" "$tmp/nan.gguf"
head -c 512 /dev/zero | tr '\0' '\377' | dd of="$tmp/nan.gguf" bs=1 seek="$off" conv=notrunc status=none
expect_stderr "NaN logits are a model error" 65 "kara run: the model computed NaN or infinite logits" \
    "$KARA" run -m "$tmp/nan.gguf" -p hi -n 4

long=$(printf 'word %.0s' $(seq 1 60))
for i in 1 2 3; do printf '{"custom_id":"f%d","body":{"messages":[{"role":"user","content":"%s"}],"max_tokens":8}}\n' "$i" "$long"; done >"$tmp/fit.jsonl"

# --- context x -j beyond the machine's memory with an automatic budget (needs 1 TiB here)
expect_stderr "auto KV pool beyond memory" 78 \
    "kara batch: a KV cache for a context of 16777216 tokens x 64 sequences (batch.max_concurrency, -j) needs 1.0 TiB with kv_cache.budget auto, more than the" \
    "$KARA" batch -m "$M" -i "$tmp/fit.jsonl" -o "$tmp/big-out.jsonl" -c 16777216 -j 64 --kv-budget auto
check "auto KV pool beyond memory: what would fit is named" "grep -q 'would fit; lower -c or -j, or set a --kv-budget' '$tmp/err'"

# --- the fit note says what then happens: a budget that holds no typical request
expect_stderr "fit note: no sequence fits" 1 \
    "kara batch: max_concurrency 4 -> 1: the KV budget of 0.2 MiB holds no sequence of about 258 prompt + 8 generated tokens under method full: requests that size fail with kv_budget_exceeded (raise --kv-budget)" \
    "$KARA" batch -m "$M" -i "$tmp/fit.jsonl" -o "$tmp/fit-out.jsonl" -j 4 --kv-budget 200000 --kv-method full
check "fit note: and those requests fail with kv_budget_exceeded" \
    "[ \$(grep -c '\"code\":\"kv_budget_exceeded\"' '$tmp/fit-out.jsonl') -eq 3 ]"
finish
