#!/usr/bin/env bash
# `kara batch` on a synthetic Qwen3 model (random weights: the text is noise,
# what is checked is the flow):
#  1. greedy answers are the same at concurrency 1, 2 and 4;
#  2. a malformed line, an unsupported url and a prompt too long for the
#     context become error lines naming their input line; the job goes on
#     and exits 1;
#  3. duplicate custom_ids are refused up front (exit 65, both lines named);
#  4. kill -9 at random moments, ten times, then a final run: every
#     custom_id is answered exactly once and the answers equal a clean run;
#  5. many sequences under a tight budget with Kara compression: the KV
#     peak stays within the budget (--stats-json), events are counted; one
#     oversized request fails or runs on its own without lowering the
#     concurrency of the rest;
#  6. shards (--shard, Slurm and Kubernetes variables) split the input into
#     disjoint parts that cover it; a job file is read and flags win over it;
#  7. exit codes for usage, missing input, output that cannot be created,
#     configuration errors.
set -u
. "$(dirname "$0")/lib/common.sh"
M="$tmp/m.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
batch() { "$KARA" batch -m "$M" -t 1 --no-progress "$@"; }
# the answers of an output, one "custom_id<TAB>line" per request, sorted,
# without the timestamp (the only field that changes between runs)
answers() { sed -e 's/"created":[0-9]*,//' "$1" | sed -e 's/^.*"custom_id":\("[^"]*"\|null\).*$/\1\t&/' | sort; }
ids() { grep -o '"custom_id":"[^"]*"' "$1" | sort; }

# 24 requests of assorted shapes
in="$tmp/in.jsonl"
: >"$in"
for i in $(seq 1 24); do
    case $((i % 3)) in
    0) echo "{\"custom_id\":\"r$i\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"question $i: $(printf 'why %.0s' $(seq 1 $i))\"}],\"max_tokens\":$((8 + i))}}" ;;
    1) echo "{\"id\":\"r$i\",\"prompt\":\"tell me about $i things\",\"max_tokens\":20}" ;;
    2) echo "{\"custom_id\":\"r$i\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"Once upon a time $i\",\"max_tokens\":16,\"stop\":[\"zz\"]}}" ;;
    esac
done >>"$in"

# 1. same greedy answers at concurrency 1, 2, 4
for j in 1 2 4; do
    batch -i "$in" -o "$tmp/g$j.jsonl" -j $j --temp 0 --kv-method full 2>"$tmp/g$j.err"
    rc=$?
    check "concurrency $j exits 0 (rc $rc)" '[ $rc -eq 0 ]'
    check "concurrency $j answers all 24" '[ "$(wc -l <"$tmp/g$j.jsonl")" -eq 24 ]'
done
answers "$tmp/g1.jsonl" >"$tmp/a1"
answers "$tmp/g2.jsonl" >"$tmp/a2"
answers "$tmp/g4.jsonl" >"$tmp/a4"
check "greedy answers equal at concurrency 1 and 2" 'cmp -s "$tmp/a1" "$tmp/a2"'
check "greedy answers equal at concurrency 1 and 4" 'cmp -s "$tmp/a1" "$tmp/a4"'
check "answers are chat.completion objects" 'grep -q "\"object\":\"chat.completion\"" "$tmp/g1.jsonl"'
check "usage is reported" 'grep -q "\"usage\":{\"prompt_tokens\":[0-9]*,\"completion_tokens\":[0-9]*" "$tmp/g1.jsonl"'
# quantized weights (Q4_K_M) too, under the AVX2 kernels: at the time of
# writing the AVX-512 Q4_0/Q8_0 (gemv) and Q4_K/Q6_K (4-row) products round
# differently by batch size, so a greedy answer can change with concurrency
Mq="$tmp/mq.gguf"
"$KARA" gen-model --preset tiny-k --arch qwen3 --type Q4_K_M -o "$Mq" >/dev/null 2>&1
for j in 1 4; do
    KARA_CPU_ISA=avx2 "$KARA" batch -m "$Mq" -t 1 --no-progress -i "$in" -o "$tmp/q$j.jsonl" -j $j --temp 0 \
        --kv-method full 2>/dev/null
done
check "Q4_K_M greedy answers equal at concurrency 1 and 4 (AVX2 kernels)" \
    '[ -s "$tmp/q1.jsonl" ] && cmp -s <(answers "$tmp/q1.jsonl") <(answers "$tmp/q4.jsonl")'
# the same prompts sampled (temperature 0.9) are also independent of concurrency
batch -i "$in" -o "$tmp/s1.jsonl" -j 1 --temp 0.9 -s 5 --kv-method full 2>/dev/null
batch -i "$in" -o "$tmp/s4.jsonl" -j 4 --temp 0.9 -s 5 --kv-method full 2>/dev/null
check "sampled answers equal at concurrency 1 and 4" 'cmp -s <(answers "$tmp/s1.jsonl") <(answers "$tmp/s4.jsonl")'
check "sampling changes the answers" '! cmp -s <(answers "$tmp/s1.jsonl") "$tmp/a1"'

# thinking goes to reasoning_content: DeepSeek-R1's template opens the think
# block; with a reasoning budget "</think>" is forced and the answer follows
printf '{"id":"t%d","prompt":"think about %d"}\n' 1 1 2 2 3 3 >"$tmp/r3.jsonl"
batch -i "$tmp/r3.jsonl" -o "$tmp/think.jsonl" --chat-template deepseek-r1 -n 20 --ignore-eos --temp 0 2>/dev/null
check "unclosed thinking: all in reasoning_content, content empty" \
    '[ "$(grep -c "\"content\":\"\",\"reasoning_content\":\"[^\"]" "$tmp/think.jsonl")" -eq 3 ]'
batch -i "$tmp/r3.jsonl" -o "$tmp/budget.jsonl" --chat-template deepseek-r1 --reasoning-budget 4 -n 20 --ignore-eos \
    --temp 0 2>/dev/null
check "reasoning budget: thinking closed, answer after it" \
    '[ "$(grep -c "\"content\":\"[^\"][^\"]*\",\"reasoning_content\":\"[^\"]" "$tmp/budget.jsonl")" -eq 3 ] && [ "$(grep -c "\"completion_tokens\":20," "$tmp/budget.jsonl")" -eq 3 ]'
check "the answer starts at its text, not at the template's blank line" '! grep -q "\"content\":\"\\\\n" "$tmp/budget.jsonl"'

# 2. bad lines become error lines naming the line
bad="$tmp/bad.jsonl"
{
    head -n 2 "$in"
    echo '{"custom_id":"broken", "body": {"messages": [}'
    echo '{"custom_id":"emb","url":"/v1/embeddings","body":{"input":"x"}}'
    echo "{\"custom_id\":\"long\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"$(printf 'word %.0s' $(seq 1 400))\"}]}}"
    echo ''
    sed -n 3p "$in"
} >"$bad"
batch -i "$bad" -o "$tmp/bad.out" -c 512 --temp 0 2>"$tmp/bad.err"
rc=$?
check "some failed: exit 1 (rc $rc)" '[ $rc -eq 1 ]'
check "every request has a line (6)" '[ "$(wc -l <"$tmp/bad.out")" -eq 6 ]'
check "malformed JSON names line 3 and column" 'grep -q "\"error\":{\"code\":\"invalid_json\",\"message\":\"input line 3, column [0-9]*: " "$tmp/bad.out"'
check "unsupported url names line 4 and keeps the custom_id" 'grep "\"custom_id\":\"emb\"" "$tmp/bad.out" | grep -q "input line 4, column [0-9]*: unsupported url"'
check "prompt too long names line 5" 'grep "\"custom_id\":\"long\"" "$tmp/bad.out" | grep -q "context_length_exceeded.*input line 5: the prompt has"'
check "the good requests still ran" '[ "$(grep -c "\"error\":null" "$tmp/bad.out")" -eq 3 ]'
# a rerun resumes: nothing more to do, still exit 1 (the failures are in the output)
batch -i "$bad" -o "$tmp/bad.out" -c 512 --temp 0 2>"$tmp/bad2.err"
rc=$?
check "rerun finds everything answered (rc $rc)" '[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/bad.out")" -eq 6 ] && grep -q "6 of 6 requests already answered" "$tmp/bad2.err"'

# 3. duplicates are refused before any work
dup="$tmp/dup.jsonl"
{ head -n 5 "$in"; sed -n 2p "$in"; } >"$dup"
batch -i "$dup" -o "$tmp/dup.out" 2>"$tmp/dup.err"
rc=$?
check "duplicates: exit 65 (rc $rc)" '[ $rc -eq 65 ]'
check "duplicate message names both lines" 'grep -q "dup.jsonl:6: duplicate custom_id \"r2\" (first on line 2)" "$tmp/dup.err"'
check "nothing was written" '[ ! -s "$tmp/dup.out" ]'

# 4. kill -9 at random points, then finish: exactly once, same answers
big="$tmp/big.jsonl"
nbig=240 # enough work that each of the ten rounds below is still running when killed
for i in $(seq 1 $nbig); do
    echo "{\"custom_id\":\"k$i\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"item $i $(printf 'x%.0s' $(seq 1 $((i % 7 * 9))))\"}],\"max_tokens\":$((40 + i % 5 * 8))}}"
done >"$big"
batch -i "$big" -o "$tmp/clean.jsonl" -j 4 --temp 0 --kv-method full 2>/dev/null
RANDOM=7
kills=0
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
for round in $(seq 1 10); do
    before=$(lines "$tmp/killed.jsonl")
    # not through the shell function: $! must be kara itself
    "$KARA" batch -m "$M" -t 1 --no-progress -i "$big" -o "$tmp/killed.jsonl" -j 4 --temp 0 --kv-method full \
        2>>"$tmp/kill.err" &
    pid=$!
    # let it answer something (at most 10 s), then kill it a random moment later
    for _ in $(seq 1 500); do
        [ "$(lines "$tmp/killed.jsonl")" -gt "$before" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.02
    done
    sleep "0.0$((RANDOM % 6))"
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
    wait $pid 2>/dev/null
done
echo "killed with -9: $kills times; $(grep -c 'already answered' "$tmp/kill.err") runs resumed, $(grep -c 'torn last line' "$tmp/kill.err") torn lines cut"
batch -i "$big" -o "$tmp/killed.jsonl" -j 4 --temp 0 --kv-method full 2>>"$tmp/kill.err"
rc=$?
check "after $kills kills the final run exits 0 (rc $rc)" '[ $rc -eq 0 ] && [ $kills -ge 5 ]'
check "every custom_id exactly once ($nbig lines, $nbig ids)" '[ "$(wc -l <"$tmp/killed.jsonl")" -eq $nbig ] && [ "$(ids "$tmp/killed.jsonl" | uniq | wc -l)" -eq $nbig ]'
check "answers after kills equal a clean run" 'cmp -s <(answers "$tmp/killed.jsonl") <(answers "$tmp/clean.jsonl")'
check "some runs resumed" 'grep -q "requests already answered" "$tmp/kill.err"'
# a torn last line (a write cut short) is cut off and redone
head -c -25 "$tmp/clean.jsonl" >"$tmp/torn.jsonl"
batch -i "$big" -o "$tmp/torn.jsonl" -j 4 --temp 0 --kv-method full 2>"$tmp/torn.err"
check "torn last line cut and redone" 'grep -q "cut a torn last line" "$tmp/torn.err" && cmp -s <(answers "$tmp/torn.jsonl") <(answers "$tmp/clean.jsonl")'
# SIGHUP (a closed terminal) stops like SIGTERM: the summary, exit 128+1, a resumable output
rm -f "$tmp/hup.jsonl"
"$KARA" batch -m "$M" -t 1 --no-progress -i "$big" -o "$tmp/hup.jsonl" -j 4 --temp 0 --kv-method full \
    2>"$tmp/hup.err" &
pid=$!
for _ in $(seq 1 100); do [ "$(lines "$tmp/hup.jsonl")" -gt 0 ] && break; sleep 0.1; done
kill -HUP $pid
wait $pid
rc=$?
check "SIGHUP: exit 129 (rc $rc) with the summary" '[ $rc -eq 129 ] && grep -q "kara batch: interrupted:" "$tmp/hup.err"'
batch -i "$big" -o "$tmp/hup.jsonl" -j 4 --temp 0 --kv-method full 2>/dev/null
check "SIGHUP: the rerun completes the same answers" 'cmp -s <(answers "$tmp/hup.jsonl") <(answers "$tmp/clean.jsonl")'
# --no-resume starts over
batch -i "$big" -o "$tmp/torn.jsonl" -j 4 --temp 0 --kv-method full --no-resume 2>/dev/null
check "--no-resume rewrites the output" '[ "$(wc -l <"$tmp/torn.jsonl")" -eq $nbig ]'

# 5. many sequences, tight budget, Kara: peak within the budget
batch -i "$big" -o "$tmp/kara.jsonl" -j 16 --temp 0 --kv-method kara --kv-budget 3MiB --kv-interval 16 \
    --kv-buffer 4 -n 64 --ignore-eos --stats-json "$tmp/kara.json" 2>"$tmp/kara.err"
rc=$?
num() { grep -o "\"$1\":[0-9.]*" "$2" | head -n 1 | cut -d: -f2; }
check "kara job exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "stats: every request ok" '[ "$(num ok "$tmp/kara.json")" = $nbig ]'
check "stats: KV peak <= budget ($(num kv_bytes_peak "$tmp/kara.json") <= $(num kv_budget "$tmp/kara.json"))" \
    '[ "$(num kv_bytes_peak "$tmp/kara.json")" -le "$(num kv_budget "$tmp/kara.json")" ] && [ "$(num kv_budget "$tmp/kara.json")" -eq 3145728 ]'
check "stats: compression events counted" '[ "$(num kv_events "$tmp/kara.json")" -gt 0 ]'
check "stats: several sequences ran at once" '[ "$(num peak_running "$tmp/kara.json")" -ge 4 ]'
check "final line reports the peak" 'grep -q "KV peak [0-9]* of 3145728 bytes" "$tmp/kara.err"'
# a third of that budget under full holds fewer sequences: concurrency is capped, and it still finishes
batch -i "$big" -o "$tmp/full.jsonl" -j 16 --temp 0 --kv-method full --kv-budget 1MiB -n 64 --ignore-eos \
    --stats-json "$tmp/full.json" 2>"$tmp/full.err"
rc=$?
check "full under the same budget exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "full: max_concurrency capped to what the budget holds" 'grep -q "max_concurrency 16 -> [0-9]*: the KV budget" "$tmp/full.err"'
check "full: KV peak <= budget" '[ "$(num kv_bytes_peak "$tmp/full.json")" -le "$(num kv_budget "$tmp/full.json")" ]'
# one oversized request does not cut everyone's concurrency: a prompt far
# beyond the context fails on its own, one that only the whole pool holds
# runs when there is room, and the others keep max_concurrency 8
ovr="$tmp/over.jsonl"
{
    for i in $(seq 1 20); do
        echo "{\"custom_id\":\"o$i\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"hello $i\"}],\"max_tokens\":16}}"
    done
    echo "{\"custom_id\":\"huge\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"$(printf 'word %.0s' $(seq 1 20000))\"}]}}"
    echo "{\"custom_id\":\"alone\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"$(seq -f 'w%g' -s ' ' 0 199)\",\"max_tokens\":16}}"
} >"$ovr"
batch -i "$ovr" -o "$tmp/over.out" -j 8 --temp 0 --kv-method full --kv-budget 1200KiB --stats-json "$tmp/over.json" \
    2>"$tmp/over.err"
rc=$?
check "oversized: only the huge request fails (rc $rc)" \
    '[ $rc -eq 1 ] && grep "\"custom_id\":\"huge\"" "$tmp/over.out" | grep -q context_length_exceeded && [ "$(num ok "$tmp/over.json")" -eq 21 ]'
check "oversized: the request only the pool holds is answered" 'grep "\"custom_id\":\"alone\"" "$tmp/over.out" | grep -q "\"error\":null"'
check "oversized: concurrency stays 8 ($(num context_sequences "$tmp/over.json") sequences, $(num peak_running "$tmp/over.json") at once)" \
    '! grep -q "max_concurrency 8 ->" "$tmp/over.err" && [ "$(num context_sequences "$tmp/over.json")" -eq 8 ] && [ "$(num peak_running "$tmp/over.json")" -ge 4 ] && grep -q "1 much larger request .* left out" "$tmp/over.err"'
batch -i "$ovr" -o "$tmp/over2.out" -j 8 --temp 0 --kv-method full --kv-budget 500KiB --stats-json "$tmp/over2.json" \
    2>/dev/null
check "oversized: what not even the whole pool holds fails naming the limit, the rest run 8 at once" \
    'grep "\"custom_id\":\"alone\"" "$tmp/over2.out" | grep -q "kv_budget_exceeded.*the pool has" && [ "$(num ok "$tmp/over2.json")" -eq 20 ] && [ "$(num context_sequences "$tmp/over2.json")" -eq 8 ]'
# optimistic admission with no fitting: preemptions happen, are counted, and answers are still right
batch -i "$big" -o "$tmp/pre.jsonl" -j 8 --temp 0 --kv-method full --kv-budget 400KiB --no-fit --optimistic \
    --stats-json "$tmp/pre.json" 2>/dev/null
rc=$?
check "preempting job exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "preemptions counted ($(num preemptions "$tmp/pre.json"))" '[ "$(num preemptions "$tmp/pre.json")" -gt 0 ]'
check "answers with preemption equal a clean run" 'cmp -s <(answers "$tmp/pre.jsonl") <(answers "$tmp/clean.jsonl")'

# 6. shards and job files
batch -i "$in" -o "$tmp/sh1.jsonl" --shard 1/2 --temp 0 2>/dev/null
batch -i "$in" -o "$tmp/sh2.jsonl" --shard 2/2 --temp 0 2>/dev/null
check "shards are disjoint and cover the input" '[ -z "$(comm -12 <(ids "$tmp/sh1.jsonl") <(ids "$tmp/sh2.jsonl"))" ] && cmp -s <(sort <(ids "$tmp/sh1.jsonl") <(ids "$tmp/sh2.jsonl")) <(ids "$tmp/g1.jsonl")'
check "shard 1/2 takes the odd lines" '[ "$(ids "$tmp/sh1.jsonl" | head -n 1)" = "\"custom_id\":\"r1\"" ] && [ "$(wc -l <"$tmp/sh1.jsonl")" -eq 12 ]'
SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3 batch -i "$in" -o "$tmp/slurm.jsonl" --temp 0 2>/dev/null
check "Slurm task 5 of 4..6 is shard 2/3 (8 requests, r2 first)" '[ "$(wc -l <"$tmp/slurm.jsonl")" -eq 8 ] && grep -q "\"custom_id\":\"r2\"" "$tmp/slurm.jsonl" && ! grep -q "\"custom_id\":\"r1\"" "$tmp/slurm.jsonl"'
JOB_COMPLETION_INDEX=0 KARA_SHARD_COUNT=4 batch -i "$in" -o "$tmp/k8s.jsonl" --temp 0 2>/dev/null
check "Kubernetes index 0 of 4 takes 6 requests" '[ "$(wc -l <"$tmp/k8s.jsonl")" -eq 6 ] && grep -q "\"custom_id\":\"r5\"" "$tmp/k8s.jsonl"'
JOB_COMPLETION_INDEX=0 batch -i "$in" -o "$tmp/k8s2.jsonl" 2>"$tmp/k8s2.err"
rc=$?
check "JOB_COMPLETION_INDEX without KARA_SHARD_COUNT: exit 78 (rc $rc)" '[ $rc -eq 78 ] && grep -q KARA_SHARD_COUNT "$tmp/k8s2.err"'
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 batch -i "$in" -o "$tmp/flag.jsonl" --shard 3/3 --temp 0 2>/dev/null
check "--shard wins over the environment" '[ "$(wc -l <"$tmp/flag.jsonl")" -eq 8 ] && grep -q "\"custom_id\":\"r3\"" "$tmp/flag.jsonl"'
cat >"$tmp/job.yaml" <<EOF
model:
  path: $M
sampling:
  temperature: 0
batch:
  input: $in
  output: $tmp/from-yaml.jsonl
  max_concurrency: 3
  shard: 2/2
EOF
"$KARA" batch "$tmp/job.yaml" -t 1 --no-progress 2>/dev/null
check "a job file runs (shard 2/2 from the file)" 'cmp -s <(answers "$tmp/from-yaml.jsonl") <(answers "$tmp/sh2.jsonl")'
"$KARA" batch "$tmp/job.yaml" -t 1 --no-progress -o "$tmp/flag-out.jsonl" --shard 1/1 2>/dev/null
check "flags win over the job file" '[ "$(wc -l <"$tmp/flag-out.jsonl")" -eq 24 ]'

# 7. exit codes
"$KARA" batch >/dev/null 2>&1
check "no arguments: usage 64" '[ $? -eq 64 ]'
batch -i "$tmp/none.jsonl" -o "$tmp/x.jsonl" >/dev/null 2>&1
check "missing input: 66" '[ $? -eq 66 ]'
batch -i "$in" -o "$tmp/no/such/dir/x.jsonl" >/dev/null 2>&1
check "output cannot be created: 73" '[ $? -eq 73 ]'
printf 'kv_cache:\n  methd: full\n' >"$tmp/badkey.yaml"
batch "$tmp/badkey.yaml" -i "$in" -o "$tmp/x.jsonl" 2>"$tmp/badkey.err"
rc=$?
check "unknown key in the job file: 78 with its line (rc $rc)" '[ $rc -eq 78 ] && grep -q "badkey.yaml:2:3" "$tmp/badkey.err"'
batch -i "$in" -o "$tmp/x.jsonl" --shard 3/2 >/dev/null 2>&1
check "bad --shard: usage 64" '[ $? -eq 64 ]'
batch -i "$in" -o "$tmp/x.jsonl" --kv-method full --kv-budget 64KiB -n 500 2>"$tmp/tiny.err"
rc=$?
check "requests the budget can never hold fail with a clear error (rc $rc)" '[ $rc -eq 1 ] && grep -q "kv_budget_exceeded" "$tmp/x.jsonl" && grep -q "lower max_tokens or raise kv_cache.budget" "$tmp/x.jsonl"'

finish
