#!/usr/bin/env bash
# What a newcomer meets first (issue 48): the notice that a KV budget cannot
# hold the whole context exactly (on a model with Qwen3-0.6B's KV shape: 28
# layers, 8 KV heads of 128), help pages short enough to read, a random seed
# shown as "random", bench's table, and notes for padding-token output and
# for a prompt sent without the model's chat template.
set -u
. "$(dirname "$0")/lib/common.sh"

Q="$tmp/q06kv.gguf" # Qwen3-0.6B's KV shape, small everywhere else
"$KARA" gen-model --preset qwen3-0.6b --arch qwen3 --hidden 64 --ffn 64 --vocab 512 -o "$Q" >/dev/null 2>&1 ||
    { echo "gen-model failed"; exit 1; }
run() { "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }

# --- the exact-context notice ---------------------------------------------------------
run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 40960
check "run -c 40960 exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "the notice says what the 1 GiB budget holds of 40,960 tokens, at start-up" \
    'grep -Eq "^kara run: note: the 1 GiB KV budget holds [0-9],[0-9]{3} of the 40,960 context tokens exactly; past that, Kara compresses \(\`--kv-budget auto\` keeps them all\)$" "$tmp/err" &&
     [ "$(grep -n "KV budget holds" "$tmp/err" | cut -d: -f1)" -lt "$(grep -n "^prompt:" "$tmp/err" | cut -d: -f1)" ]'
check "once" '[ "$(grep -c "KV budget holds" "$tmp/err")" -eq 1 ]'
run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 40960 --kv-budget auto
check "--kv-budget auto removes it (rc $rc)" '[ $rc -eq 0 ] && ! grep -q "KV budget holds" "$tmp/err"'
run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 4096
check "a context the budget holds gets no notice" '[ $rc -eq 0 ] && ! grep -q "KV budget holds" "$tmp/err"'
run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 40960 --print-config
check "--print-config says it too" '[ $rc -eq 0 ] && grep -Eq "^# the 1 GiB KV budget holds [0-9,]+ of the 40,960 context tokens exactly" "$tmp/out"'

# --- a context the machine cannot hold is refused with both numbers --------------------
run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 16000000 --kv-budget auto
check "-c 16000000 with a KV budget to match: refused, with what it needs and what there is (rc $rc)" \
    '[ $rc -ne 0 ] && grep -Eq "^kara run: a KV cache for a context of 16000000 tokens x 1 sequence \(batch.max_concurrency, -j\) needs [0-9.]+ TiB with kv_cache.budget auto, more than the [0-9.]+ GiB of memory here: 0 sequences of 16000000 tokens, or 1 sequence of about [0-9]+ tokens, would fit; lower -c or -j, or set a --kv-budget$" "$tmp/err"'

# --- the report line in plain words -----------------------------------------------------
check "the memory line names the cache, its tokens and the scoring buffers" \
    'run "$KARA" run -m "$Q" -p Hello -n 2 -t 1 -c 40960; grep -Eq "KV memory [0-9.]+ MiB \(cache [0-9.]+ MiB for [0-9]+ tokens, scoring buffers [0-9.]+ MiB\)$" "$tmp/err"'
check "no jargon (share, reservation)" '! grep -Eq "share|reservation" "$tmp/err"'

# --- padding tokens and the chat template -------------------------------------------
check "a model with a chat template: run says that the prompt goes without it" \
    'grep -q "note: this model carries a chat template and \`run\` sends the prompt as plain text" "$tmp/err"'
run "$KARA" run -m "$Q" -p "<|im_start|>user
hi<|im_end|>" -n 2 -t 1
check "not when the prompt already uses the template" '[ $rc -eq 0 ] && ! grep -q "carries a chat template" "$tmp/err"'
P="$tmp/pad.gguf" # 8,192 entries, most of them padding: greedy decoding picks them
"$KARA" gen-model --preset tiny --arch qwen3 --vocab 8192 -o "$P" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
run "$KARA" run -m "$P" -p Hello -n 8 -t 1 --temp 0 --ignore-eos
check "output that prints as nothing is explained (rc $rc)" \
    '[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = Hello ] && grep -q "the 8 generated tokens print as nothing: they are unused or padding entries" "$tmp/err"'
run "$KARA" run -m "$Q" -p Hello -n 8 -t 1 --temp 0 --ignore-eos -c 256
check "visible output gets no such note" '[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" != Hello ] && ! grep -q "print as nothing" "$tmp/err"'

# --- help pages -------------------------------------------------------------------------
"$KARA" run --help >"$tmp/help" 2>&1
check "kara run --help is at most 30 lines ($(wc -l <"$tmp/help"))" '[ "$(wc -l <"$tmp/help")" -le 30 ]'
check "it ends by pointing at --help-all" 'tail -1 "$tmp/help" | grep -q "^more: --help-all"'
check "no ablation knob in it" '! grep -Eq "kv-trigger|kv-selection-scope|kv-reads-weight|kv-evict-lag|ablation" "$tmp/help"'
check "a random default reads \"random\"" 'grep -Eq "^  -s,--seed .*\(default: random\)$" "$tmp/help"'
"$KARA" run --help-all >"$tmp/all" 2>&1
check "--help-all lists the research knobs" 'grep -q -- "--kv-trigger" "$tmp/all" && grep -q -- "--kv-selection-scope" "$tmp/all"'
"$KARA" bench --help >"$tmp/bh" 2>&1
check "bench --help lists only what bench uses" '! grep -Eq -- "--temp|--top-k|--kv-method|--spec" "$tmp/bh" && grep -Eq -- "^  -n,.*\(default: 128\)$" "$tmp/bh"'

# --- bench: a table on request (a terminal's default), a warning on a wide spread -------
run "$KARA" bench -m "$Q" -t 1 -p 8 -n 4 -r 2 -o md
check "bench -o md prints llama-bench's table (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "^| model | size | params | backend | threads | test | t/s |$" "$tmp/out" &&
     grep -Eq "^\| qwen3 .* \| [0-9.]+ MiB \| [0-9.]+ M \| CPU \| 1 \| pp8 \| [0-9.]+ ± [0-9.]+ \|$" "$tmp/out" &&
     grep -Eq "\| tg4 \| [0-9.]+ ± [0-9.]+ \|$" "$tmp/out"'
run "$KARA" bench -m "$Q" -t 1 -p 8 -n 4 -r 1 -o jsonl
check "bench -o jsonl keeps the JSON lines" '[ $rc -eq 0 ] && grep -q "^{\"engine\":\"kara\"" "$tmp/out"'
run "$KARA" bench -m "$Q" -o csv
check "bench -o takes md or jsonl" '[ $rc -eq 64 ] && grep -q "expected md or jsonl" "$tmp/err"'

# --- chat: /help lists every command; a single-turn model says so --------------------
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
R="$SRC/tools/train/model/kara-reasoner-1m.gguf"
printf '/help\n' | "$KARA" chat -m "$Q" -t 1 -c 256 >"$tmp/help.out" 2>&1
for c in /exit /quit /bye /help /clear /regen /read /set /stats; do
    check "chat's /help lists $c" 'grep -q -- "^$c\b\|, $c\b" "$tmp/help.out"'
done
printf 'Sum #1 58*2 + #2 35*26.\nAnd #1 3*4?\n' | "$KARA" chat -m "$R" -t 1 -n 8 --temp 0 >"$tmp/st.out" 2>"$tmp/st.err"
check "a single-turn model: the follow-up gets a note suggesting /clear" \
    '[ "$(grep -c "this model answers one message per conversation: /clear before a new question" "$tmp/st.err")" -eq 1 ]'
printf 'hi\nagain\n' | "$KARA" chat -m "$Q" -t 1 -n 4 -c 256 >/dev/null 2>"$tmp/mt.err"
check "not for a model that does not say so" '! grep -q "one message per conversation" "$tmp/mt.err"'

finish
