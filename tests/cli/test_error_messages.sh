#!/usr/bin/env bash
# Every error names its cause (issue 19): each command on bad input exits
# with its documented code, and its last line on stderr is
# "kara CMD: reason" with a reason that is not empty, does not end in a
# bare colon, and names what is wrong (a word the case gives). Uses the
# shipped model and files this test writes; needs no ../shared.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
R="$SRC/tools/train/model/kara-reasoner-1m.gguf"
# expect NAME CODE WORD COMMAND...: exit CODE, last stderr line "kara ...: reason" containing WORD
expect() {
    local name=$1 code=$2 word=$3
    shift 3
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    local last
    last=$(grep -v '^[[:space:]]*$' "$tmp/err" | grep -v '^usage:\|^  \|^$' | grep '^kara' | tail -1)
    local reason=${last#*: }
    if [ "$rc" -eq "$code" ] && [[ "$last" =~ ^kara([ ][a-z-]+)?:\ . ]] && [ -n "$reason" ] &&
        [[ ! "$last" =~ :[[:space:]]*$ ]] && grep -qi -- "$word" <<<"$last"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name: exit $rc (wanted $code); last line: '$last' (wanted a reason naming '$word')"
    fi
}

"$KARA" gen-model --preset tiny --arch qwen3 --type f32 -o "$tmp/m.gguf" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
M="$tmp/m.gguf"
head -c 3000 "$M" >"$tmp/trunc.gguf"
echo "not a model" >"$tmp/text.gguf"
# Metadata that claims 2^29 layers (a u32 after the key and its type):
# refused before the loader allocates anything for them.
python3 - "$M" "$tmp/layers.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.index(b"qwen3.block_count") + len("qwen3.block_count")
assert struct.unpack_from("<I", b, at)[0] == 4  # GGUF_TYPE_UINT32
struct.pack_into("<I", b, at + 4, 1 << 29)
open(sys.argv[2], "wb").write(b)
PY
mkfifo "$tmp/fifo"
mkdir "$tmp/dir"
printf 'kara:\n  retension: 0.2\n' >"$tmp/typo.yaml"
printf 'kara: [unclosed\n' >"$tmp/syntax.yaml"
printf 'batch:\n  on_changed: skip\n' >"$tmp/on_changed.yaml"
printf '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}]}}\n' >"$tmp/ok.jsonl"
printf '{"id":"x","prompt":"Sum #1 5*5.","answer":"25"}\nnot json\n' >"$tmp/tasks.jsonl"

# run: files and flags
expect "run: missing model" 66 "nope.gguf" "$KARA" run -m "$tmp/nope.gguf" -p hi
expect "run: no model" 64 "model" "$KARA" run -p hi
expect "run: a FIFO as the model" 66 "regular file" "$KARA" run -m "$tmp/fifo"
expect "run: a directory as the model" 66 "regular file" "$KARA" run -m "$tmp/dir"
expect "run: /dev/null as the model" 66 "regular file" "$KARA" run -m /dev/null
expect "run: truncated GGUF" 65 "offset" "$KARA" run -m "$tmp/trunc.gguf" -p hi
expect "run: not a GGUF" 65 "magic" "$KARA" run -m "$tmp/text.gguf" -p hi
expect "run: more layers than tensors" 65 "layers of width" "$KARA" run -m "$tmp/layers.gguf" -p hi
expect "run: unknown flag" 64 "frobnicate" "$KARA" run -m "$M" --frobnicate
expect "run: bad number" 64 "temperature" "$KARA" run -m "$M" --temp hot
expect "run: --spec draft without a draft model" 78 "draft model" "$KARA" run -m "$M" -p hi --spec draft
expect "run: missing draft model" 66 "nope-draft.gguf" "$KARA" run -m "$M" -p hi --spec draft -md "$tmp/nope-draft.gguf"
expect "run: draft model of another vocabulary" 78 "same vocabulary" "$KARA" run -m "$R" -p hi --spec draft -md "$M"
expect "run: bad draft_p_min" 64 "draft_p_min" "$KARA" run -m "$M" -p hi --spec draft -md "$M" --draft-p-min 2
expect "run: out of range" 64 "range" "$KARA" run -m "$M" -c 99999999
expect "run: bad KV method" 64 "kv_cache.method" "$KARA" run -m "$M" --kv-method lru
expect "run: budget too small" 65 "budget" "$KARA" run -m "$M" --kv-budget 1KiB -p hi
expect "run: token outside the vocabulary" 64 "vocabulary" "$KARA" run -m "$M" --prompt-ids 1,2,999999
expect "run: prompt longer than the context" 65 "context" "$KARA" run -m "$M" -c 16 -p "$(printf 'word %.0s' $(seq 1 60))"
expect "run: missing prompt file" 66 "nope.txt" "$KARA" run -m "$M" -f "$tmp/nope.txt"
expect "run: two prompts" 64 "only one" "$KARA" run -m "$M" -p a -f "$tmp/typo.yaml"
expect "run: -ctk and -ctv differ" 64 "differ" "$KARA" run -m "$M" -ctk f16 -ctv f32
# configuration files
expect "config: missing file" 66 "no-such.yaml" "$KARA" run -m "$M" --config "$tmp/no-such.yaml"
expect "config: a FIFO" 66 "regular file" "$KARA" run -m "$M" --config "$tmp/fifo"
expect "config: unknown key" 78 "retension" "$KARA" run -m "$M" --config "$tmp/typo.yaml"
expect "config: YAML syntax" 78 "syntax.yaml" "$KARA" run -m "$M" --config "$tmp/syntax.yaml"
# other commands
expect "chat: missing model" 66 "nope.gguf" "$KARA" chat -m "$tmp/nope.gguf"
expect "tokenize: no text" 64 "-p" "$KARA" tokenize -m "$M"
expect "inspect: truncated" 65 "offset" "$KARA" inspect "$tmp/trunc.gguf"
expect "inspect: missing" 66 "nope.gguf" "$KARA" inspect "$tmp/nope.gguf"
expect "quantize: unknown type" 64 "Q3_X" "$KARA" quantize "$M" "$tmp/q.gguf" Q3_X
expect "quantize: missing input" 66 "nope.gguf" "$KARA" quantize "$tmp/nope.gguf" "$tmp/q.gguf" Q8_0
expect "quantize: unwritable output" 73 "dir/x/q.gguf" "$KARA" quantize "$M" "$tmp/dir/x/q.gguf" Q8_0
expect "gen-model: bad preset" 64 "preset" "$KARA" gen-model --preset huge -o "$tmp/g.gguf"
expect "gen-model: bad vocabulary" 64 "vocab" "$KARA" gen-model --vocab 3 -o "$tmp/g.gguf"
expect "bench: bad repetitions" 64 "-r" "$KARA" bench -m "$M" -r 0
expect "bench: missing model" 66 "nope.gguf" "$KARA" bench -m "$tmp/nope.gguf"
expect "eval: no tasks" 64 "tasks" "$KARA" eval -m "$R"
expect "eval: missing tasks file" 65 "nope.jsonl" "$KARA" eval -m "$R" --tasks "$tmp/nope.jsonl"
expect "eval: a bad task line" 65 "line 2" "$KARA" eval -m "$R" --tasks "$tmp/tasks.jsonl"
expect "eval-kv: missing text" 66 "nope.txt" "$KARA" eval-kv -m "$M" -f "$tmp/nope.txt"
expect "batch: no input" 64 "input" "$KARA" batch -m "$M" -o "$tmp/o.jsonl"
expect "batch: a FIFO as input" 66 "regular file" "$KARA" batch -m "$M" -i "$tmp/fifo" -o "$tmp/o.jsonl"
expect "batch: bad shard" 64 "shard" "$KARA" batch -m "$M" -i "$tmp/ok.jsonl" -o "$tmp/o.jsonl" --shard 3/2
expect "batch: bad batch.on_changed" 78 "on_changed.yaml:2:15: batch.on_changed: unknown value 'skip' (expected rerun | refuse | keep)" "$KARA" batch -m "$M" --config "$tmp/on_changed.yaml" -i "$tmp/ok.jsonl" -o "$tmp/o.jsonl"
expect "batch: bad --on-changed" 64 "--on-changed: batch.on_changed: unknown value 'skip'" "$KARA" batch -m "$M" -i "$tmp/ok.jsonl" -o "$tmp/o.jsonl" --on-changed skip
expect "batch: output directory missing" 73 "dir/x" "$KARA" batch -m "$M" -i "$tmp/ok.jsonl" -o "$tmp/dir/x/o.jsonl"
expect "unknown command" 64 "frob" "$KARA" frob

# limits (configs/README.md, "Limits"): a prompt text over 64 MiB is refused, naming the file and the limit
head -c $((64 * 1024 * 1024 + 1)) /dev/zero | tr '\0' a >"$tmp/big.txt"
big_msg="big.txt: larger than 67108864 bytes (64 MiB), the limit of a prompt text"
{ printf '# x\n'; head -c 4194301 /dev/zero | tr '\0' '#'; } >"$tmp/big.yaml" # 4 MiB + 1 byte of comments
expect "config: a file over 4 MiB" 78 "kara run: $tmp/big.yaml: larger than 4194304 bytes; not a config file" \
    "$KARA" run -m "$M" --config "$tmp/big.yaml" -p hi
# (-c at its largest: a smaller context refuses the file sooner, as too long for it: test_limits.sh)
expect "run: a prompt file over 64 MiB" 65 "kara run: $tmp/$big_msg" "$KARA" run -m "$M" -c 16777216 -f "$tmp/big.txt"
expect "tokenize: a file over 64 MiB" 65 "kara tokenize: $tmp/$big_msg" "$KARA" tokenize -m "$M" -f "$tmp/big.txt"
expect "tokenize: stdin over 64 MiB" 65 "kara tokenize: stdin: larger than 67108864 bytes (64 MiB), the limit" \
    bash -c "exec \"\$0\" tokenize -m \"\$1\" -f - <\"\$2\"" "$KARA" "$M" "$tmp/big.txt"
expect "eval-kv: a text over 64 MiB" 65 "kara eval-kv: $tmp/$big_msg" "$KARA" eval-kv -m "$M" -f "$tmp/big.txt"
expect "chat: an input line over 64 MiB is not sent, the session goes on" 65 \
    "kara chat: message not sent: larger than 67108864 bytes (64 MiB), the limit of a prompt text" \
    bash -o pipefail -c "{ cat \"\$2\"; printf '\\n/help\\n'; } | \"\$0\" chat -m \"\$1\" -n 2 | grep -q 'read FILE'" "$KARA" "$M" "$tmp/big.txt"
# a request line over 16 MiB is an error line naming its line and
# the limit, and the job goes on; only the first 16 MiB + 1 byte of it are kept in memory
# found NAME CONDITION: a case checked by hand
found() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
{
    printf '{"custom_id":"big","body":{"messages":[{"role":"user","content":"'
    head -c 16777216 /dev/zero | tr '\0' a
    printf '"}]}}\n{"custom_id":"small","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}}\n'
} >"$tmp/long.jsonl"
timeout 60 "$KARA" batch -m "$M" -i "$tmp/long.jsonl" -o "$tmp/long.out" --no-progress 2>"$tmp/err" </dev/null
rc=$?
long_err='"custom_id":null,"response":null,"error":{"code":"invalid_request","message":"input line 1: longer than 16777216 bytes (16 MiB), the limit of a request line","line":1}'
found "batch: a request line over 16 MiB is an error line, the job goes on (rc $rc)" \
    '[ $rc -eq 1 ] && grep -qF "$long_err" "$tmp/long.out" && grep -q "\"custom_id\":\"small\",\"response\":{\"status_code\":200" "$tmp/long.out" &&
     grep -qxF "kara batch: $tmp/long.jsonl: 1 line longer than 16777216 bytes (16 MiB), the limit of a request line (line 1)" "$tmp/err"'

finish
