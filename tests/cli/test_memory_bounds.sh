#!/usr/bin/env bash
# ctest-label: slow
# Peak memory before a refusal (issue 44): input over its limit is refused
# while it is read, not after it has cost memory several times its size.
# Each case is measured with /usr/bin/time -v (package `time`,
# tools/install_deps.sh) and must stay under 100 MB of peak RSS:
#   a 60 MB prompt file with -c 2048 (refused from its length: 2048 tokens
#   cover at most 2048 x the longest token's bytes);
#   a 31 MB batch file of two 15.5 MB request lines (each refused as
#   context_length_exceeded before its tokens are made);
#   a 45 MB GGUF with 2 million merges for 512 tokens (refused at load).
# Slow-labelled: a sanitizer build's shadow memory would distort the RSS.
set -u
. "$(dirname "$0")/lib/common.sh"
LIMIT_KB=$((100 * 1000))
if [ ! -x /usr/bin/time ]; then
    echo "FAIL: /usr/bin/time is missing: install the package 'time' (tools/install_deps.sh)"
    exit 1
fi
# bounded NAME CODE TEXT COMMAND...: exit CODE, TEXT on stderr, peak RSS under LIMIT_KB
bounded() {
    local name=$1 code=$2 text=$3
    shift 3
    /usr/bin/time -v -o "$tmp/time" timeout 300 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    local kb
    kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$tmp/time")
    if [ "$rc" -eq "$code" ] && grep -qF -- "$text" "$tmp/err" && [ -n "$kb" ] && [ "$kb" -lt "$LIMIT_KB" ]; then
        pass=$((pass + 1))
        echo "$name: peak RSS $kb kB"
    else
        fail=$((fail + 1))
        echo "FAIL: $name: exit $rc (wanted $code), peak RSS ${kb:-?} kB (limit $LIMIT_KB), stderr: $(head -c 400 "$tmp/err")"
    fi
}
"$KARA" gen-model --preset tiny --arch qwen3 --type f32 -o "$tmp/m.gguf" >/dev/null 2>&1 || {
    echo "FAIL: gen-model"; exit 1; }
M="$tmp/m.gguf"

yes 'the quick brown fox jumps over the lazy dog' | head -c 60000000 >"$tmp/p60.txt"
bounded "run: a 60 MB prompt file, -c 2048" 65 \
    "kara run: the prompt file $tmp/p60.txt has more than 26624 bytes: a context of 2048 tokens holds at most 26624 bytes of text" \
    "$KARA" run -m "$M" -c 2048 -f "$tmp/p60.txt" -n 4

for id in a b; do
    printf '{"custom_id":"%s","body":{"messages":[{"role":"user","content":"' "$id"
    yes 'the quick brown fox jumps over the lazy dog' | head -c 15500000 | tr '\n' ' '
    printf '"}]}}\n'
done >"$tmp/big.jsonl"
bounded "batch: two 15.5 MB request lines" 1 "done: 0 ok, 2 failed this run" \
    "$KARA" batch -m "$M" -c 2048 -i "$tmp/big.jsonl" -o "$tmp/big-out.jsonl"
check "batch: both lines are context_length_exceeded" \
    "[ \$(grep -c '\"code\":\"context_length_exceeded\"' '$tmp/big-out.jsonl') -eq 2 ]"

# the tiny model's tokenizer with 2 million merges (python rewrites its KV section)
python3 - "$M" "$tmp/merges.gguf" 2000000 <<'PY'
import struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = open(src, "rb").read()
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
pos = 0
def take(k):
    global pos
    pos += k
    return b[pos - k:pos]
def u32(): return struct.unpack("<I", take(4))[0]
def u64(): return struct.unpack("<Q", take(8))[0]
def skip(t):
    if t == 8: take(u64())
    elif t == 9:
        et, cnt = u32(), u64()
        for _ in range(cnt): skip(et)
    else: take(SZ[t])
magic, ver, nt, nkv = take(4), u32(), u64(), u64()
out = bytearray(magic + struct.pack("<IQQ", ver, nt, nkv))
for _ in range(nkv):
    start = pos
    key = take(u64()); t = u32(); skip(t)
    if key == b"tokenizer.ggml.merges":
        m = b"abcdef ghijkl"
        out += struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, n) + (struct.pack("<Q", len(m)) + m) * n
    else:
        out += b[start:pos]
tstart = pos
for _ in range(nt):
    take(u64()); nd = u32(); take(8 * nd); u32(); u64()
out += b[tstart:pos]
out += b"\0" * ((-len(out)) % 32)
out += b[(pos + 31) // 32 * 32:]
open(dst, "wb").write(out)
PY
bounded "a GGUF with 2000000 merges for 512 tokens" 65 \
    "tokenizer.ggml.merges: 2000000 merges for 512 tokens; at most 2048 (4 per token) are plausible" \
    "$KARA" run -m "$tmp/merges.gguf" -p hi -n 2
finish
