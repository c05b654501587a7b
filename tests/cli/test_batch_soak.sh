#!/usr/bin/env bash
# ctest-label: slow
# `kara batch` resume soak on a synthetic Qwen3 model (random weights; greedy
# decoding, so every answer is a function of its request alone):
#  1. a 500-request job is stopped 50 times at random moments - mostly kill -9,
#     some SIGTERM and SIGHUP (exit 143 / 129 with the summary line), some
#     rounds --ordered (results parked in OUTPUT.hold) - and resumed each
#     time; then every custom_id is answered exactly once, each line carries
#     its request's hash, and the answers equal a clean uninterrupted run's;
#  2. a request edited under an existing custom_id: --on-changed refuse stops
#     (exit 65, the id named, nothing touched), keep keeps the old answer,
#     the default reruns it: still exactly once, its new answer equals a
#     clean run of the edited request, the old one is in OUTPUT.superseded;
#     with --ordered the output stays in input order; an edited request whose
#     answer waits in OUTPUT.hold runs again too;
#  3. an output written before request hashes existed is trusted, with a note.
set -u
. "$(dirname "$0")/lib/common.sh"
CHECK="$(dirname "$0")/batch_shape_check.py"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
M="$tmp/m.gguf"
"$KARA" gen-model --preset tiny --arch qwen3 -o "$M" >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
OPTS=(-m "$M" -t 1 --no-progress --temp 0 --kv-method full -j 3 --ignore-eos)
batch() { "$KARA" batch "${OPTS[@]}" "$@"; }
shape() { python3 "$CHECK" "$@" >"$tmp/shape.log" 2>&1 || { cat "$tmp/shape.log"; return 1; }; }
# the answers without the timestamp, sorted (compares runs)
answers() { sed -e 's/"created":[0-9]*,//' "$1" | sort; }
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
start=$SECONDS

# 1. 500 requests of three shapes and a few lengths (about 105000 tokens:
# enough that each round below leaves work for the next)
in="$tmp/in.jsonl"
n=500
for i in $(seq 1 $n); do
    t=$((150 + i % 4 * 40))
    case $((i % 3)) in
    0) echo "{\"custom_id\":\"s$i\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"item $i\"}],\"max_tokens\":$t}}" ;;
    1) echo "{\"custom_id\":\"s$i\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"Once $i\",\"max_tokens\":$t}}" ;;
    2) echo "{\"id\":\"s$i\",\"prompt\":\"tell me $i\",\"max_tokens\":$t}" ;;
    esac
done >"$in"
batch -i "$in" -o "$tmp/clean.jsonl" 2>/dev/null
check "clean run: $n answers with the Batch API fields and request hashes" \
    'shape "$in" "$tmp/clean.jsonl" --errors 0 && [ "$(grep -c "\"kara_request_hash\":\"[0-9a-f]\{16\}\"}$" "$tmp/clean.jsonl")" -eq $n ]'

out="$tmp/soak.jsonl"
RANDOM=19
kills=0 terms=0 term_ok=0 early=0
for round in $(seq 1 50); do
    before=$(lines "$out")
    extra=()
    [ $((round % 5)) -eq 2 ] && extra=(--ordered --ordered-hold $((round % 3)))
    "$KARA" batch "${OPTS[@]}" -i "$in" -o "$out" "${extra[@]}" 2>>"$tmp/soak.err" &
    pid=$!
    # a random moment: some right at start (loading, resume scan), most after
    # 0 to 5 new answers, plus up to 9 ms
    want=$((RANDOM % 6))
    if [ $((RANDOM % 8)) -ne 0 ]; then
        for _ in $(seq 1 2000); do
            [ $(($(lines "$out") - before)) -ge $want ] && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.005
        done
    fi
    sleep "0.00$((RANDOM % 10))"
    sig=KILL
    [ $((round % 10)) -eq 3 ] && sig=TERM
    [ $((round % 10)) -eq 7 ] && sig=HUP
    if kill -$sig $pid 2>/dev/null; then
        { wait $pid; } 2>/dev/null
        rc=$?
        if [ $sig = KILL ]; then
            kills=$((kills + 1))
        else
            terms=$((terms + 1))
            want_rc=143
            [ $sig = HUP ] && want_rc=129
            # a signal that lands before the handlers are set kills like -9
            if [ $rc -eq $want_rc ] && tail -n 1 "$tmp/soak.err" | grep -q "kara batch: interrupted:"; then
                term_ok=$((term_ok + 1))
            elif [ $rc -ne $((128 + $(kill -l $sig))) ]; then
                echo "SIG$sig: exit $rc"
            fi
        fi
    else
        { wait $pid; } 2>/dev/null
        early=$((early + 1))
    fi
done
echo "soak: $kills kill -9, $terms SIGTERM/SIGHUP ($term_ok with the summary), $early rounds finished first;" \
    "$(grep -c 'already answered' "$tmp/soak.err") resumed, $(grep -c 'torn last line' "$tmp/soak.err") torn lines cut," \
    "$(grep -c 'held in' "$tmp/soak.err") took back held results; $(lines "$out") of $n answered before the last run"
check "stopped 50 times before the job was done ($kills + $terms, $early finished first)" \
    '[ $((kills + terms)) -eq 50 ] && [ $kills -ge 40 ]'
check "SIGTERM and SIGHUP stop with the summary and 128 + signal ($term_ok of $terms)" '[ $term_ok -ge 6 ]'
batch -i "$in" -o "$out" 2>"$tmp/final.err"
rc=$?
check "the final run exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "every custom_id exactly once, each with its request hash" 'shape "$in" "$out" --errors 0 && [ "$(lines "$out")" -eq $n ]'
check "answers after the soak equal the clean run" 'cmp -s <(answers "$out") <(answers "$tmp/clean.jsonl")'
check "the hold file is gone" '[ ! -e "$out.hold" ]'

# 2. a request edited under an existing custom_id
edit="$tmp/edit.jsonl"
sed -e 's/"tell me 50"/"tell me fifty"/' "$in" >"$edit"
cp "$out" "$tmp/before.jsonl"
batch -i "$edit" -o "$out" --on-changed refuse 2>"$tmp/refuse.err"
rc=$?
check "--on-changed refuse: exit 65 naming the id, nothing touched (rc $rc)" \
    '[ $rc -eq 65 ] && grep -q "1 request changed since .*: \"s50\" (line 50)" "$tmp/refuse.err" && cmp -s "$out" "$tmp/before.jsonl"'
batch -i "$edit" -o "$out" --on-changed keep 2>"$tmp/keep.err"
rc=$?
check "--on-changed keep: nothing runs, the old answer stays (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "old answer is kept" "$tmp/keep.err" && cmp -s "$out" "$tmp/before.jsonl"'
batch -i "$edit" -o "$out" 2>"$tmp/rerun.err"
rc=$?
check "default: the edited request runs again (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "499 of 500 requests already answered" "$tmp/rerun.err" && grep -q "1 request changed since .* moved to .*superseded" "$tmp/rerun.err"'
check "still exactly once, hashes of the edited input" 'shape "$edit" "$out" --errors 0 && [ "$(lines "$out")" -eq $n ]'
sed -n 50p "$edit" >"$tmp/one.jsonl"
batch -i "$tmp/one.jsonl" -o "$tmp/one.out" 2>/dev/null
check "the new answer equals a clean run of the edited request" \
    'cmp -s <(grep "\"custom_id\":\"s50\"" "$out" | answers /dev/stdin) <(answers "$tmp/one.out")'
check "the other answers are untouched" \
    'cmp -s <(grep -v "\"custom_id\":\"s50\"" "$out" | answers /dev/stdin) <(grep -v "\"custom_id\":\"s50\"" "$tmp/clean.jsonl" | answers /dev/stdin)'
check "the old answer is in OUTPUT.superseded" \
    '[ "$(lines "$out.superseded")" -eq 1 ] && cmp -s <(answers "$out.superseded") <(grep "\"custom_id\":\"s50\"" "$tmp/clean.jsonl" | answers /dev/stdin)'
batch -i "$edit" -o "$out" 2>"$tmp/again.err"
check "a further resume has nothing to do" 'grep -q "500 of 500 requests already answered" "$tmp/again.err" && ! grep -q changed "$tmp/again.err"'

# --ordered: an edit in the middle keeps the output in input order
head -n 40 "$in" >"$tmp/o.jsonl"
sed -e 's/"item 12"/"item twelve"/' "$tmp/o.jsonl" >"$tmp/o2.jsonl"
batch -i "$tmp/o.jsonl" -o "$tmp/o.out" --ordered 2>/dev/null
cp "$tmp/o.out" "$tmp/o.clean"
batch -i "$tmp/o2.jsonl" -o "$tmp/o.out" --ordered 2>"$tmp/o.err"
rc=$?
check "--ordered rerun of an edit: input order kept, later answers taken back from OUTPUT.hold (rc $rc)" \
    '[ $rc -eq 0 ] && shape "$tmp/o2.jsonl" "$tmp/o.out" --ordered --errors 0 && grep -q "28 later answers moved to" "$tmp/o.err" && [ ! -e "$tmp/o.out.hold" ]'
check "--ordered: the other answers are untouched" \
    'cmp -s <(grep -v "\"custom_id\":\"s12\"" "$tmp/o.out" | answers /dev/stdin) <(grep -v "\"custom_id\":\"s12\"" "$tmp/o.clean" | answers /dev/stdin)'
# an edited request whose answer waits in OUTPUT.hold runs again
grep -v "\"custom_id\":\"s5\"" "$tmp/o.out" | head -n 4 >"$tmp/h.out"
grep "\"custom_id\":\"s5\"" "$tmp/o.out" >"$tmp/h.out.hold"
sed -e 's/"tell me 5"/"tell me five"/' "$tmp/o.jsonl" >"$tmp/h.jsonl"
batch -i "$tmp/h.jsonl" -o "$tmp/h.out" --ordered 2>"$tmp/h.err"
check "a held answer of an edited request is run again" \
    'grep -q "1 held answer in .* for an older version of its request" "$tmp/h.err" && shape "$tmp/h.jsonl" "$tmp/h.out" --ordered --errors 0'
grep "\"custom_id\":\"s5\"" "$tmp/o.out" >"$tmp/h.out.hold"
head -n 4 "$tmp/o.out" >"$tmp/h.out"
batch -i "$tmp/h.jsonl" -o "$tmp/h.out" --ordered --on-changed refuse 2>"$tmp/h2.err"
rc=$?
check "refuse sees an edited request in OUTPUT.hold too (rc $rc)" \
    '[ $rc -eq 65 ] && grep -q "\"s5\" (line 5)" "$tmp/h2.err" && [ "$(lines "$tmp/h.out")" -eq 4 ]'

# 3. an output without request hashes (an older kara) is trusted
sed -e 's/,"kara_request_hash":"[0-9a-f]*"}$/}/' "$tmp/clean.jsonl" | head -n 300 >"$tmp/old.jsonl"
batch -i "$edit" -o "$tmp/old.jsonl" 2>"$tmp/old.err"
rc=$?
check "old output: trusted with a note, the rest answered (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "note: 300 answers in .* carry no request hash" "$tmp/old.err" && shape "$edit" "$tmp/old.jsonl" --errors 0'

echo "soak test: $((SECONDS - start)) s"
finish
