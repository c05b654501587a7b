#!/usr/bin/env bash
# `kara tokenize`: output formats (default, --pieces, --ids-only), inputs from
# -p, -f FILE and -f - (stdin), --special and --no-bos, exit codes. Uses a
# synthetic model made by `kara gen-model` (a tiny byte-level BPE vocabulary
# whose byte tokens have id = byte value); the real Qwen2 and Llama-2 SPM
# vocabularies from ../shared are checked too when it is present.
set -u
. "$(dirname "$0")/lib/common.sh"
SHARED="${KARA_SHARED:-${KARA_SOURCE_DIR:-.}/../shared}"
M="$tmp/m.gguf"
"$KARA" gen-model --arch qwen3 --vocab 277 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
tok() { "$KARA" tokenize -m "$M" "$@"; }

# 1. ids: " the" is one merged token (260), "he" another (257); bytes are their value
out=$(tok --ids-only -p "he the")
check "ids-only output ($out)" '[ "$out" == "257 260" ]'
out=$(tok -p "he the")
check "default output ($out)" '[ "$out" == "2 tokens: 257 260" ]'
out=$(tok --pieces -p $'he\tthe')
check "pieces output ($out)" "[ \"\$out\" == \"4 tokens: 257 'he' 9 '\\\\t' 116 't' 257 'he'\" ]"

# 2. one line per input, files and stdin
printf 'he' >"$tmp/a.txt"
out=$(printf 'the' | tok --ids-only -p "he" -f "$tmp/a.txt" -f -)
check "one line per input ($out)" '[ "$out" == $'"'"'257\n257\n116 257'"'"' ]'

# 3. special tokens: control ones only with --special, user-defined ones always
out=$(tok --ids-only -p "<|im_start|>he")
check "control token not parsed by default ($out)" '[ "$out" != "273 257" ] && ! grep -qw 273 <<<"$out"'
out=$(tok --ids-only --special -p "<|im_start|>he")
check "control token parsed with --special ($out)" '[ "$out" == "273 257" ]'
out=$(tok --ids-only -p "<think>he</think>")
check "user-defined tokens always parsed ($out)" '[ "$out" == "275 257 276" ]'
out=$(tok --pieces --special -p "<|im_end|>")
check "pieces show control tokens ($out)" "[ \"\$out\" == \"1 tokens: 274 '<|im_end|>'\" ]"

# 4. malformed UTF-8 is tokenized as U+FFFD (EF BF BD), not rejected
out=$(printf 'a\xffb' | tok --ids-only -f -)
check "invalid UTF-8 ($out)" '[ "$out" == "97 239 191 189 98" ]'

# 5. exit codes
tok >/dev/null 2>&1
check "no input is a usage error" '[ $? -eq 64 ]'
"$KARA" tokenize -p x >/dev/null 2>&1
check "no model is a usage error" '[ $? -eq 64 ]'
"$KARA" tokenize -m "$tmp/none.gguf" -p x >/dev/null 2>&1
check "missing model file is 66" '[ $? -eq 66 ]'
tok -f "$tmp/none.txt" >/dev/null 2>&1
check "missing input file is 66" '[ $? -eq 66 ]'
printf 'GGUF garbage' >"$tmp/bad.gguf"
"$KARA" tokenize -m "$tmp/bad.gguf" -p x >/dev/null 2>"$tmp/bad.err"
rc=$?
check "malformed model is 65 ($rc)" '[ $rc -eq 65 ]'
tok --pieces --ids-only -p x >/dev/null 2>&1
check "--pieces with --ids-only is a usage error" '[ $? -eq 64 ]'

# 6. real vocabularies (llama.cpp's ids)
if [ -d "$SHARED/vocab" ]; then
    out=$("$KARA" tokenize -m "$SHARED/vocab/ggml-vocab-qwen2.gguf" --ids-only -p "Hello world")
    check "qwen2 'Hello world' ($out)" '[ "$out" == "9707 1879" ]'
    out=$("$KARA" tokenize -m "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --ids-only -p "Hello world")
    check "llama-spm adds BOS ($out)" '[ "$out" == "1 15043 3186" ]'
    out=$("$KARA" tokenize -m "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --ids-only --no-bos -p "Hello world")
    check "llama-spm --no-bos ($out)" '[ "$out" == "15043 3186" ]'
else
    echo "note: $SHARED/vocab not found, real vocabularies not checked"
fi

finish
