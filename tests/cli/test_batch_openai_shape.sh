#!/usr/bin/env bash
# `kara batch` output fidelity, on a synthetic Qwen3 model (random weights:
# what is checked is the shape and the order, not the text):
#  1. a job mixing /v1/chat/completions, /v1/completions (prompt as a string
#     and as a one-element array) and the plain {"id","prompt"} form, with
#     failing lines: every output line has the OpenAI Batch API's documented
#     fields and types, chat.completion vs text_completion bodies, usage
#     totals, error lines {"code","message"}; run with and without --ordered;
#  2. /v1/completions prompts the API allows but one line cannot answer
#     (several prompts, token ids) are error lines naming their input line;
#  3. --ordered writes input order even when the first request is by far the
#     longest, holding the rest in memory or (--ordered-hold) in OUTPUT.hold,
#     which is gone when the job ends;
#  4. --ordered killed with -9 at random moments: the output is always a
#     prefix of the input order; the final run answers every request once,
#     in input order, with the answers of a clean run; SIGTERM moves the
#     results held in memory to OUTPUT.hold and the rerun takes them back.
set -u
. "$(dirname "$0")/lib/common.sh"
CHECK="$(dirname "$0")/batch_shape_check.py"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
M="$tmp/m.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
batch() { "$KARA" batch -m "$M" -t 1 --no-progress --temp 0 --kv-method full "$@"; }
shape() { python3 "$CHECK" "$@" >"$tmp/shape.log" 2>&1 || { cat "$tmp/shape.log"; return 1; }; }
# the answers without the timestamp, sorted (compares runs)
answers() { sed -e 's/"created":[0-9]*,//' "$1" | sort; }
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# 1. a mixed job; the first request is much the longest so that finish order differs from input order
in="$tmp/in.jsonl"
{
    echo '{"custom_id":"long","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"tell a long story"}],"max_tokens":160}}'
    for i in $(seq 1 12); do
        case $((i % 4)) in
        0) echo "{\"custom_id\":\"chat$i\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"m$i\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"question $i\"}],\"max_tokens\":$((4 + i))}}" ;;
        1) echo "{\"custom_id\":\"cmpl$i\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"Once upon a time $i\",\"max_tokens\":$((3 + i))}}" ;;
        2) echo "{\"custom_id\":\"arr$i\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[\"In the beginning $i\"],\"max_tokens\":6,\"stop\":[\"zz\"]}}" ;;
        3) echo "{\"id\":\"plain$i\",\"prompt\":\"tell me about $i\",\"max_tokens\":5}" ;;
        esac
    done
    echo '{"custom_id":"broken", "body": {"messages": [}'
    echo '{"custom_id":"multi","method":"POST","url":"/v1/completions","body":{"prompt":["a","b"],"max_tokens":4}}'
    echo '{"custom_id":"toks","method":"POST","url":"/v1/completions","body":{"prompt":[1,2,3],"max_tokens":4}}'
    echo '{"custom_id":"noprompt","method":"POST","url":"/v1/completions","body":{"max_tokens":4}}'
    echo '{"method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"x"}]}}'
    echo ''
    echo '{"custom_id":"last","method":"POST","url":"/v1/completions","body":{"prompt":"The end","max_tokens":3}}'
} >"$in"
nreq=$(grep -c . "$in")
batch -i "$in" -o "$tmp/free.jsonl" -j 4 2>"$tmp/free.err"
rc=$?
check "mixed job exits 1: some lines fail (rc $rc)" '[ $rc -eq 1 ]'
check "finish order: every line has the Batch API fields ($(tail -n 1 "$tmp/shape.log" 2>/dev/null))" \
    'shape "$in" "$tmp/free.jsonl" --errors 5'
check "finish order differs from input order here (the long head finishes last)" \
    '! python3 "$CHECK" "$in" "$tmp/free.jsonl" --ordered >/dev/null'
batch -i "$in" -o "$tmp/ord.jsonl" -j 4 --ordered 2>"$tmp/ord.err"
rc=$?
check "--ordered mixed job exits 1 (rc $rc)" '[ $rc -eq 1 ]'
check "--ordered: Batch API fields and input order" 'shape "$in" "$tmp/ord.jsonl" --ordered --errors 5'
check "--ordered answers equal finish-order answers" 'cmp -s <(answers "$tmp/ord.jsonl") <(answers "$tmp/free.jsonl")'
check "completions: text_completion with choices[].text" \
    'grep "\"custom_id\":\"cmpl1\"" "$tmp/ord.jsonl" | grep -q "\"object\":\"text_completion\".*\"choices\":\[{\"text\":\"[^\"]*\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}\]"'
check "a one-element prompt array is answered" 'grep "\"custom_id\":\"arr2\"" "$tmp/ord.jsonl" | grep -q "\"error\":null"'
check "chat keeps body.model and reasoning_content" \
    'grep "\"custom_id\":\"chat4\"" "$tmp/ord.jsonl" | grep -q "\"object\":\"chat.completion\",\"created\":[0-9]*,\"model\":\"m4\".*\"reasoning_content\":null"'

# 2. prompts one line cannot answer
check "several prompts: an error naming line 15" \
    'grep "\"custom_id\":\"multi\"" "$tmp/ord.jsonl" | grep -q "\"invalid_request\",\"message\":\"input line 15, column [0-9]*: body.prompt holds 2 prompts"'
check "token ids: an error naming line 16" \
    'grep "\"custom_id\":\"toks\"" "$tmp/ord.jsonl" | grep -q "input line 16, column [0-9]*: body.prompt as token ids is not supported"'
check "no prompt: an error naming line 17" \
    'grep "\"custom_id\":\"noprompt\"" "$tmp/ord.jsonl" | grep -q "input line 17, column [0-9]*: /v1/completions needs body.prompt"'
nocid='"custom_id":null,"response":null,"error":{"code":"invalid_request","message":"input line 18: missing \"custom_id\"","line":18},"kara_request_hash":"'
check "no custom_id: custom_id null, the line in the error" 'grep -qF "$nocid" "$tmp/ord.jsonl"'

# 3. everything held ahead of the long head goes to the hold file, which is removed at the end
batch -i "$in" -o "$tmp/spill.jsonl" -j 4 --ordered --ordered-hold 0 2>"$tmp/spill.err"
check "--ordered-hold 0: input order, same answers" \
    'shape "$in" "$tmp/spill.jsonl" --ordered --errors 5 && cmp -s <(answers "$tmp/spill.jsonl") <(answers "$tmp/free.jsonl")'
check "the hold file is removed at the end" '[ ! -e "$tmp/spill.jsonl.hold" ] && [ ! -e "$tmp/ord.jsonl.hold" ]'
# the YAML key batch.ordered does what --ordered does
printf 'batch:\n  ordered: true\n' >"$tmp/ordered.yaml"
batch --config "$tmp/ordered.yaml" -i "$in" -o "$tmp/yaml.jsonl" -j 4 2>"$tmp/yaml.err"
check "batch.ordered: true in YAML: input order, same answers" \
    'shape "$in" "$tmp/yaml.jsonl" --ordered --errors 5 && cmp -s <(answers "$tmp/yaml.jsonl") <(answers "$tmp/free.jsonl")'
# the YAML key batch.on_changed does what --on-changed does, and the flag wins over it
sed -e 's/question 4"/question four"/' "$in" >"$tmp/edited.jsonl"
cp "$tmp/yaml.jsonl" "$tmp/yaml.before"
printf 'batch:\n  on_changed: refuse\n' >"$tmp/refuse.yaml"
batch --config "$tmp/refuse.yaml" -i "$tmp/edited.jsonl" -o "$tmp/yaml.jsonl" -j 4 2>"$tmp/refuse.err"
rc=$?
check "batch.on_changed: refuse in YAML: exit 65 naming the changed id, output untouched (rc $rc)" \
    '[ $rc -eq 65 ] && grep -q "1 request changed since .*: \"chat4\" (line 5)" "$tmp/refuse.err" && cmp -s "$tmp/yaml.jsonl" "$tmp/yaml.before"'
batch --config "$tmp/refuse.yaml" --on-changed keep -i "$tmp/edited.jsonl" -o "$tmp/yaml.jsonl" -j 4 2>"$tmp/keep.err"
check "--on-changed keep wins over batch.on_changed: refuse" \
    'grep -q "old answer is kept" "$tmp/keep.err" && cmp -s "$tmp/yaml.jsonl" "$tmp/yaml.before"'
# an unordered rerun of a finished ordered output has nothing to do
batch -i "$in" -o "$tmp/ord.jsonl" -j 4 2>"$tmp/rerun.err"
check "rerun without --ordered finds all $nreq answered" \
    'grep -q "$nreq of $nreq requests already answered" "$tmp/rerun.err" && [ "$(lines "$tmp/ord.jsonl")" -eq $nreq ]'

# 4. kill -9 an ordered job at random moments
big="$tmp/big.jsonl"
nbig=200 # enough work (about 15000 tokens) that each round below is still running when killed
for i in $(seq 1 $nbig); do
    if [ $((i % 40)) -eq 1 ]; then n=700; else n=$((30 + i % 5 * 15)); fi # a long one every 40
    if [ $((i % 2)) -eq 0 ]; then
        echo "{\"custom_id\":\"k$i\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"item $i\",\"max_tokens\":$n}}"
    else
        echo "{\"custom_id\":\"k$i\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"item $i\"}],\"max_tokens\":$n}}"
    fi
done >"$big"
batch -i "$big" -o "$tmp/clean.jsonl" -j 4 --ignore-eos 2>/dev/null
check "clean run of the kill input: all answered" 'shape "$big" "$tmp/clean.jsonl" --errors 0'
RANDOM=11
kills=0 prefix_ok=0
out="$tmp/killed.jsonl"
for round in $(seq 1 8); do
    before=$(lines "$out")
    hold=2
    [ $((round % 2)) -eq 0 ] && hold=1000 # odd rounds spill to the hold file, even ones hold in memory
    "$KARA" batch -m "$M" -t 1 --no-progress --temp 0 --kv-method full -i "$big" -o "$out" -j 4 --ignore-eos \
        --ordered --ordered-hold $hold 2>>"$tmp/kill.err" &
    pid=$!
    for _ in $(seq 1 500); do
        [ "$(lines "$out")" -gt "$before" ] && break
        [ -s "$out.hold" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.02
    done
    sleep "0.0$((RANDOM % 8))"
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
    wait $pid 2>/dev/null
    if python3 "$CHECK" "$big" "$out" --prefix >"$tmp/prefix.log" 2>&1; then
        prefix_ok=$((prefix_ok + 1))
    else
        cat "$tmp/prefix.log"
    fi
done
echo "ordered: killed with -9 $kills times; $(grep -c 'already answered' "$tmp/kill.err") runs resumed," \
    "$(grep -c 'held in' "$tmp/kill.err") took results back from the hold file"
check "after every kill the output is a prefix of the input order ($prefix_ok of 8)" '[ $prefix_ok -eq 8 ]'
batch -i "$big" -o "$out" -j 4 --ignore-eos --ordered 2>"$tmp/final.err"
rc=$?
check "after $kills kills the final ordered run exits 0 (rc $rc)" '[ $rc -eq 0 ] && [ $kills -ge 4 ]'
check "every request once, in input order, Batch API fields" 'shape "$big" "$out" --ordered --errors 0'
check "answers after kills equal a clean run" 'cmp -s <(answers "$out") <(answers "$tmp/clean.jsonl")'
check "some runs took results back from the hold file" 'cat "$tmp/kill.err" "$tmp/final.err" | grep -q "held in"'
check "the hold file is gone" '[ ! -e "$out.hold" ]'

# SIGTERM: the results held in memory are parked in the hold file, and the rerun takes them back.
# The big job above takes well under a second, too short to stop reliably on a busy machine, so this
# uses a slower model (about 1 ms a step) and a head of 2000 tokens: the 12 short requests behind it
# finish within about 30 steps and are held for the remaining 1970, a window of seconds.
M2="$tmp/m2.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 --hidden 512 --ffn 1536 --layers 4 --ctx 4096 -o "$M2" >/dev/null 2>&1 ||
    { echo "gen-model (slow model) failed"; exit 1; }
tin="$tmp/term_in.jsonl"
{
    echo '{"custom_id":"head","method":"POST","url":"/v1/completions","body":{"prompt":"x","max_tokens":2000}}'
    for i in $(seq 1 12); do
        echo "{\"custom_id\":\"s$i\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"y $i\",\"max_tokens\":6}}"
    done
} >"$tin"
tbatch() { "$KARA" batch -m "$M2" -t 1 --no-progress --temp 0 --kv-method full -i "$tin" -j 4 --ignore-eos --ordered "$@"; }
tbatch -o "$tmp/term_clean.jsonl" 2>/dev/null
term="$tmp/term.jsonl"
for delay in 0.3 0.6 1.2; do # a later try only if the process got too little CPU to finish the short ones
    rm -f "$term" "$term.hold"
    # kara itself in the background, not a shell function: $! must be its pid
    "$KARA" batch -m "$M2" -t 1 --no-progress --temp 0 --kv-method full -i "$tin" -o "$term" -j 4 --ignore-eos \
        --ordered 2>"$tmp/term.err" &
    pid=$!
    sleep $delay
    kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    [ -s "$term.hold" ] && break
done
check "SIGTERM: exit 143 with the summary, the output a prefix (rc $rc)" \
    '[ $rc -eq 143 ] && grep -q "kara batch: interrupted:" "$tmp/term.err" && python3 "$CHECK" "$tin" "$term" --prefix >/dev/null'
check "SIGTERM: held results parked in the hold file ($(lines "$term.hold") held, $(lines "$term") written)" \
    '[ -s "$term.hold" ] && [ "$(lines "$term")" -eq 0 ]'
tbatch -o "$term" 2>"$tmp/term2.err"
check "SIGTERM: the rerun takes them back and completes in order" \
    'grep -q "held in $term.hold" "$tmp/term2.err" && shape "$tin" "$term" --ordered --errors 0 && cmp -s <(answers "$term") <(answers "$tmp/term_clean.jsonl") && [ ! -e "$term.hold" ]'

# an ordered job resumed without --ordered still answers each request once (held results are written)
rm -f "$tmp/mix.jsonl"
"$KARA" batch -m "$M" -t 1 --no-progress --temp 0 --kv-method full -i "$big" -o "$tmp/mix.jsonl" -j 4 \
    --ignore-eos --ordered --ordered-hold 0 2>/dev/null &
pid=$!
for _ in $(seq 1 500); do [ -s "$tmp/mix.jsonl.hold" ] && break; sleep 0.02; done
sleep 0.1
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
batch -i "$big" -o "$tmp/mix.jsonl" -j 4 --ignore-eos 2>/dev/null
check "ordered then unordered: each request once, same answers" \
    'shape "$big" "$tmp/mix.jsonl" --errors 0 && cmp -s <(answers "$tmp/mix.jsonl") <(answers "$tmp/clean.jsonl") && [ ! -e "$tmp/mix.jsonl.hold" ]'
# --no-resume drops an old hold file along with the output
printf '{"custom_id":"k2","response":null,"error":{"code":"x","message":"input line 2: stale","line":2}}\n' \
    >"$tmp/nr.jsonl.hold"
batch -i "$big" -o "$tmp/nr.jsonl" -j 4 --ignore-eos --ordered --no-resume 2>/dev/null
check "--no-resume ignores and removes an old hold file" \
    'shape "$big" "$tmp/nr.jsonl" --ordered --errors 0 && [ ! -e "$tmp/nr.jsonl.hold" ]'

finish
