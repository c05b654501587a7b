#!/usr/bin/env bash
# `kara run` on bad input: each case must fail with the documented exit code
# and a message that names the problem, and never crash. Uses models the
# project writes itself (kara gen-model), so it needs no ../shared.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
expect() { # name, wanted exit code, pattern the stderr must contain, command...
    local name=$1 code=$2 pattern=$3
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$code" ] && grep -q -- "$pattern" "$tmp/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name: exit $rc (wanted $code), stderr: $(head -c 300 "$tmp/err")"
    fi
}

"$KARA_BIN" gen-model --preset tiny --arch qwen3 --type f32 -o "$tmp/m.gguf" >/dev/null 2>&1 || {
    echo "FAIL: gen-model"; echo "0 passed, 1 failed"; exit 1; }

expect "missing model file" 66 "cannot open" "$KARA_BIN" run -m "$tmp/nope.gguf" -p hi -n 1
expect "no model flag" 64 "no model" "$KARA_BIN" run -p hi
expect "unknown flag" 64 "unknown option" "$KARA_BIN" run -m "$tmp/m.gguf" --frobnicate
expect "bad number" 64 "temp" "$KARA_BIN" run -m "$tmp/m.gguf" --temp hot
expect "bad kv method" 64 "kv_cache.method" "$KARA_BIN" run -m "$tmp/m.gguf" --kv-method lru

head -c 1000 "$tmp/m.gguf" >"$tmp/trunc.gguf"
expect "truncated GGUF" 65 "offset" "$KARA_BIN" run -m "$tmp/trunc.gguf" -p hi -n 1
printf 'GGUF\x07\x00\x00\x00' >"$tmp/v7.gguf"
expect "unsupported GGUF version" 65 "version 7" "$KARA_BIN" run -m "$tmp/v7.gguf" -p hi -n 1
echo "not a model" >"$tmp/text.gguf"
expect "not a GGUF" 65 "bad magic" "$KARA_BIN" run -m "$tmp/text.gguf" -p hi -n 1

long=$(printf 'word %.0s' $(seq 1 400))
# 2000 bytes cannot fit 64 tokens of at most 13 bytes each: refused from its length, before tokenizing
expect "prompt longer than the context, by its bytes" 65 \
    "kara run: the prompt has 2000 bytes: a context of 64 tokens holds at most 832 bytes of text (64 tokens x 13 bytes, the model's longest token) (raise -c)" \
    "$KARA_BIN" run -m "$tmp/m.gguf" -c 64 -p "$long" -n 1
long=$(printf 'word %.0s' $(seq 1 100))
expect "prompt longer than the context, by its tokens" 65 "the prompt has 401 tokens but the context holds 64 (raise -c)" \
    "$KARA_BIN" run -m "$tmp/m.gguf" -c 64 -p "$long" -n 1
expect "token id outside the vocabulary" 64 "outside the vocabulary" "$KARA_BIN" run -m "$tmp/m.gguf" --prompt-ids 1,2,999999 -n 1
expect "KV budget too small" 65 "KV budget" "$KARA_BIN" run -m "$tmp/m.gguf" -p hi -n 4 --kv-budget 1KiB

# what is not a regular file is refused at once (a FIFO would block a reader forever)
mkfifo "$tmp/fifo"
expect "FIFO as the model" 66 "not a regular file" timeout 20 "$KARA_BIN" run -m "$tmp/fifo" -p hi -n 1
expect "/dev/null as the model" 66 "'/dev/null': not a regular file" "$KARA_BIN" run -m /dev/null -p hi -n 1
expect "directory as the model" 66 "not a regular file" "$KARA_BIN" run -m "$tmp" -p hi -n 1
expect "FIFO as the config" 66 "cannot open config: not a regular file" timeout 20 "$KARA_BIN" run \
    --config "$tmp/fifo" -m "$tmp/m.gguf" -p hi
expect "FIFO as the batch input" 66 "input .*fifo: not a regular file" timeout 20 "$KARA_BIN" batch \
    -m "$tmp/m.gguf" --input "$tmp/fifo" --output "$tmp/o.jsonl"
# invalid UTF-8 (U+FFFD per bad byte, several tokens each): tokenized, not refused
printf '\xf2\xad\xbe\xd9\xde\xeb\x8b\xc1\xe6' >"$tmp/bad-utf8.txt"
expect "invalid UTF-8 prompt is tokenized" 0 "tokens in" "$KARA_BIN" run -m "$tmp/m.gguf" -f "$tmp/bad-utf8.txt" -n 1
"$KARA_BIN" tokenize -m "$tmp/m.gguf" -f "$tmp/bad-utf8.txt" >"$tmp/tok.out" 2>"$tmp/tok.err"
rc=$?
if [ $rc -eq 0 ] && grep -Eq "^[0-9]+ tokens:" "$tmp/tok.out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: kara tokenize on invalid UTF-8: exit $rc, $(head -c 300 "$tmp/tok.err")"; fi

printf 'context:\n  size: 128\n  bogus: 1\n' >"$tmp/bad.yaml"
expect "unknown config key" 78 "bad.yaml:3:3" "$KARA_BIN" run --config "$tmp/bad.yaml" -m "$tmp/m.gguf" -p hi

# nesting of any depth within the size cap is refused at once (libyaml's own work grows with its square)
awk 'BEGIN { printf "a: "; for (i = 0; i < 200000; i++) printf "["; for (i = 0; i < 200000; i++) printf "]"; print "" }' \
    >"$tmp/deep.yaml"
expect "deeply nested YAML" 78 "deep.yaml:1:35: nesting deeper than 32 levels" timeout 20 "$KARA_BIN" run \
    --config "$tmp/deep.yaml" -m "$tmp/m.gguf" -p hi

# a context past the model's training length runs, with a warning naming both numbers
expect "context past the training length warned" 0 "context of 4096 positions is longer than the model's training context of 1024" \
    "$KARA_BIN" run -m "$tmp/m.gguf" -c 4096 -p hi -n 1

# and a good run still works, with --print-config naming the flag as the origin
"$KARA_BIN" run -m "$tmp/m.gguf" -c 64 --temp 0.5 --print-config >"$tmp/cfg" 2>/dev/null
if grep -q "temperature: 0.5.*--temp" "$tmp/cfg"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: --print-config does not show the flag's origin"; fi
"$KARA_BIN" run -m "$tmp/m.gguf" --prompt-ids 1,2,3 -n 5 --temp 0 >"$tmp/out" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "generation: 5 tokens" "$tmp/err"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: a plain run: $(cat "$tmp/err")"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
