#!/usr/bin/env bash
# `kara batch` resume knows what it resumes (synthetic models, a few tokens
# per request):
#  1. OUTPUT.meta records the model's content hash and the settings; a
#     resume with another model or another -n is refused (exit 78) naming
#     each change, old -> new, and touches nothing; --on-changed rerun
#     supersedes every answer and runs them again;
#  2. a fixed invalid line is answered on the next run and its old error
#     line superseded; the exit status and the summary agree (1 iff the
#     output still holds error lines, counted new and old);
#  3. a reformatted request (key order, spaces, 4.0 for 4) is not rerun;
#  4. under kv_cache.method full a raised -c retries a context_length_exceeded
#     line, an unchanged one does not, and a raised --kv-budget retries a
#     kv_budget_exceeded line; under an evicting method they are answer
#     settings and refused;
#  5. OUTPUT.superseded: a torn last line is repaired and a line it holds
#     already is not added twice;
#  6. duplicate result lines are reported and the first kept; a valid JSON
#     last line that is not a result is not deleted; a complete last line
#     without its newline is kept.
set -u
. "$(dirname "$0")/lib/common.sh"
M="$tmp/m.gguf"
M2="$tmp/m2.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
"$KARA" gen-model --preset tiny --arch qwen3 --seed 2 -o "$M2" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
out="$tmp/o.jsonl"
batch() { "$KARA" batch -t 1 --no-progress --temp 0 -i "$tmp/in.jsonl" -o "$out" "$@"; }
json_ok() { python3 -c 'import json,sys
for l in open(sys.argv[1]): json.loads(l)' "$1" 2>/dev/null; }
line_of() { grep "\"custom_id\":\"$1\"" "$out"; }

printf '%s\n' '{"id":"a","prompt":"hi","max_tokens":4}' '{"id":"b" "prompt":"x"}' \
    '{"id":"c","prompt":"yo","max_tokens":4}' >"$tmp/in.jsonl"
batch -m "$M" 2>"$tmp/e1"
rc=$?
check "first run: exit 1 with one invalid_json line, summary says 1 new (rc $rc)" \
    '[ $rc -eq 1 ] && [ "$(grep -c invalid_json "$out")" -eq 1 ] && grep -q "holds 1 error line: 1 written this run, 0 from earlier runs" "$tmp/e1"'
check "OUTPUT.meta records the model hash and settings" \
    'grep -q "\"model.hash\":\"[0-9a-f]\{16\}-[0-9]*\"" "$out.meta" && grep -q "\"sampling.temperature\":\"0.0\"" "$out.meta"'
batch -m "$M" 2>"$tmp/e2"
rc=$?
check "plain resume: exit 1, the error line is old and named (rc $rc)" \
    '[ $rc -eq 1 ] && grep -q "holds 1 error line: 0 written this run, 1 from earlier runs (input line 2)" "$tmp/e2"'

# 1. another model, another -n
cp "$out" "$tmp/before"
batch -m "$M2" 2>"$tmp/e3"
rc=$?
check "another model: exit 78 naming it, output untouched (rc $rc)" \
    '[ $rc -eq 78 ] && grep -q "^  model: .*m.gguf (.*) -> .*m2.gguf (.*)$" "$tmp/e3" && cmp -s "$out" "$tmp/before"'
batch -m "$M" -n 7 2>"$tmp/e4"
rc=$?
check "another -n: exit 78 naming sampling.max_tokens -1 -> 7 (rc $rc)" \
    '[ $rc -eq 78 ] && grep -q "^  sampling.max_tokens: -1 -> 7$" "$tmp/e4" && [ "$(grep -c "^  " "$tmp/e4")" -eq 1 ] && cmp -s "$out" "$tmp/before"'
batch -m "$M" --on-changed keep -n 7 2>/dev/null
rc=$?
check "--on-changed keep does not accept changed settings (rc $rc)" '[ $rc -eq 78 ]'

# 2 and 3. the invalid line fixed, the first one reformatted
printf '%s\n' '{ "max_tokens" : 4.0 , "prompt":"hi",  "id":"a" }' '{"id":"b", "prompt":"x","max_tokens":3}' \
    '{"id":"c","prompt":"yo","max_tokens":4}' >"$tmp/in.jsonl"
batch -m "$M" 2>"$tmp/e5"
rc=$?
check "fixed line answered: exit 0, nothing failed, no old errors (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "1 ok, 0 failed this run" "$tmp/e5" && ! grep -q "error line:" "$tmp/e5" && ! grep -q "\"error\":{" "$out"'
check "its old error line is superseded; each request once" \
    '[ "$(grep -c invalid_json "$out.superseded")" -eq 1 ] && [ "$(wc -l <"$out")" -eq 3 ] && line_of b >/dev/null && grep -q "retrying 1 error line (1 of input lines that now parse" "$tmp/e5"'
check "the reformatted request is not rerun" '[ "$(line_of a)" = "$(grep "\"custom_id\":\"a\"" "$tmp/before")" ]'

# 1. --on-changed rerun over another model
cp "$out" "$tmp/before"
batch -m "$M2" --on-changed rerun 2>"$tmp/e6"
rc=$?
check "--on-changed rerun: every answer superseded and run again with the new model (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "3 ok, 0 failed this run" "$tmp/e6" && [ "$(wc -l <"$out")" -eq 3 ] && [ "$(wc -l <"$out.superseded")" -eq 4 ] && grep -q "\"model.file\":\"$M2\"" "$out.meta"'
check "the new answers differ from the old model's" \
    '! cmp -s <(sed -e "s/\"created\":[0-9]*//" "$out" | sort) <(sed -e "s/\"created\":[0-9]*//" "$tmp/before" | sort)'
batch -m "$M2" 2>"$tmp/e7"
rc=$?
check "then a plain resume with the new model runs nothing (rc $rc)" '[ $rc -eq 0 ] && grep -q "3 of 3 requests already answered" "$tmp/e7" && grep -q "0 ok, 0 failed this run" "$tmp/e7"'

# 5. a torn OUTPUT.superseded (a full disk), and a line it holds already
lines=$(wc -l <"$out.superseded")
line_of c >>"$out.superseded" # as if the last rewrite had stopped after moving it
printf '{"id":"batch_req_0","custom_id":"x","resp' >>"$out.superseded"
sed -i 's/"yo"/"yo!"/' "$tmp/in.jsonl"
batch -m "$M2" 2>"$tmp/e8"
rc=$?
check "torn .superseded repaired: valid JSON, the torn line gone, no line twice (rc $rc)" \
    '[ $rc -eq 0 ] && json_ok "$out.superseded" && [ "$(wc -l <"$out.superseded")" -eq $((lines + 1)) ] && [ "$(sort "$out.superseded" | uniq -d | wc -l)" -eq 0 ]'

# 6. duplicates, a foreign last line, a last line without its newline
first=$(head -n 1 "$out")
head -n 1 "$out" | sed -e 's/"created":[0-9]*/"created":1/' >>"$out"
batch -m "$M2" 2>"$tmp/e9"
rc=$?
check "a duplicate result line is reported and the first kept (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "answers 1 request more than once (first: \".*\" at output lines 1 and 4)" "$tmp/e9" && [ "$(wc -l <"$out")" -eq 3 ] && [ "$(head -n 1 "$out")" = "$first" ] && grep -q "\"created\":1," "$out.superseded"'
echo '{"foo":1}' >>"$out"
cp "$out" "$tmp/before"
batch -m "$M2" 2>"$tmp/e10"
rc=$?
check "a valid non-result last line is not deleted: exit 65, file unchanged (rc $rc)" \
    '[ $rc -eq 65 ] && grep -q "output line 4 is not a batch result" "$tmp/e10" && cmp -s "$out" "$tmp/before"'
head -n 3 "$tmp/before" >"$out"
printf '{"foo":1}' >>"$out"
cp "$out" "$tmp/before2"
batch -m "$M2" 2>"$tmp/e10b"
rc=$?
check "... nor without its newline: exit 65, file unchanged (rc $rc)" \
    '[ $rc -eq 65 ] && grep -q "output line 4 is not a batch result" "$tmp/e10b" && cmp -s "$out" "$tmp/before2"'
head -n 3 "$tmp/before" >"$out"
truncate -s -1 "$out"
batch -m "$M2" 2>"$tmp/e11"
rc=$?
check "a complete last line without its newline is kept (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "lacked its newline" "$tmp/e11" && grep -q "3 of 3 requests already answered" "$tmp/e11" && cmp -s "$out" <(head -n 3 "$tmp/before")'

# 4. limits: -c under kv_cache.method full
out="$tmp/c.jsonl"
printf '{"id":"s","prompt":"hi","max_tokens":4}\n{"id":"long","prompt":"%s","max_tokens":4}\n' \
    "$(printf 'word %.0s' $(seq 1 80))" >"$tmp/in.jsonl"
batch -m "$M" --kv-method full -c 64 2>/dev/null
batch -m "$M" --kv-method full -c 64 2>"$tmp/c1"
rc=$?
check "an unchanged -c does not retry context_length_exceeded (rc $rc)" \
    '[ $rc -eq 1 ] && [ "$(grep -c context_length_exceeded "$out")" -eq 1 ] && grep -q "0 ok, 0 failed this run" "$tmp/c1"'
batch -m "$M" --kv-method full -c 512 2>"$tmp/c2"
rc=$?
check "a raised -c retries it and supersedes the old line (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "^  context.size: 64 -> 512$" "$tmp/c2" && grep -q "1 of limits that changed" "$tmp/c2" && [ "$(wc -l <"$out")" -eq 2 ] && ! grep -q "\"error\":{" "$out" && grep -q context_length_exceeded "$out.superseded"'
out="$tmp/k.jsonl"
batch -m "$M" --kv-method full -c 512 --kv-budget 200KiB 2>/dev/null
rc=$?
batch -m "$M" --kv-method full -c 512 --kv-budget 2MiB 2>"$tmp/k1"
rc2=$?
check "a raised KV budget retries a kv_budget_exceeded line (rc $rc then $rc2)" \
    '[ $rc -eq 1 ] && [ $rc2 -eq 0 ] && grep -q "^  kv_cache.budget: 200KiB -> 2MiB$" "$tmp/k1" && grep -q kv_budget_exceeded "$out.superseded" && ! grep -q "\"error\":{" "$out"'
out="$tmp/c.jsonl"
batch -m "$M" --kv-method kara -c 512 2>"$tmp/c3"
rc=$?
check "under an evicting method the method and context are answer settings (rc $rc)" \
    '[ $rc -eq 78 ] && grep -q "^  kv_cache.method: full -> kara$" "$tmp/c3"'
finish
