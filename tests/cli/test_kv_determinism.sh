#!/usr/bin/env bash
# ctest-label: slow
# A sequence's output depends only on its prompt, its seed and the
# configuration (configs/README.md, "Notes on defaults"): never on how many
# other sequences run beside it (`kara batch -j N`), the order they arrive in,
# preemption, or a kill -9 followed by a resume. End to end through the `kara`
# command, greedy (--temp 0), outputs compared byte for byte per custom_id
# (only the "created" timestamp is left out; a difference is reported with its
# custom_id and first differing byte):
#  1. the shipped reasoning model on 24 problems (12 of tier 1, 12 of tier 2,
#     in the OpenAI Batch format), every KV method (full; kara on demand, the
#     default; kara per_window; chunkkv, recent, random; the threshold
#     baselines snapkv, h2o, streaming, rkv and lazy (its window 64, so that
#     its budget holds a prompt and a window), whose budget_tokens auto
#     follows the share) under a per-sequence share of 300 slots
#     (--kv-seq-tokens), which the problems (about 400-610 tokens) outgrow, so
#     every method but full evicts (--stats-json kv_slots_evicted > 0, full
#     0): -j 1 = -j 8 = -j 8 with the input in reverse order. For kara on
#     demand, kara per_window, random, snapkv, h2o and lazy, a job killed with
#     kill -9 at random moments four times (at -j 1, 8, 3, 5) and resumed to
#     completion at -j 8 = the clean -j 1 run. For kara on demand and per_window and snapkv, -j 8 under a 3.5 / 2.5 MiB budget with
#     --optimistic --no-fit, where sequences are preempted and recomputed =
#     the clean run;
#  2. no KV flags at all (kara, on demand, 1 GiB): -j 1 = -j 8, nothing
#     evicted, nothing reserved, byte for byte full's output, and every answer
#     (the content after the thinking) is the task file's reference answer;
#  3. --kv-method full and no -n: every request answered, at -j 1 and -j 8;
#  4. a Q4_K_M model of Qwen3-0.6B's shape written by the test (random
#     weights, byte-level vocabulary): 4 short requests, 40 tokens each
#     (--ignore-eos), kara on demand under a share of 72 slots (window 16,
#     buffer 4) and h2o under the same share: -j 1 = -j 4, events and
#     evictions counted; one kill -9 of the kara job at -j 2 while the last two
#     requests decode, resumed at -j 4 = the clean run. gen-model takes about
#     50 s on one core, so it runs in the background while parts 1-3 run.
# Every run takes one thread (-t 1). About 70 s on 2 idle cores, 2-2.5 min
# when other jobs load them.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
genpid=""
trap '[ -n "$genpid" ] && kill $genpid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
start=$SECONDS

# part 4's model, written on the second core while parts 1-3 run on the first
Q="$tmp/q06.gguf"
"$KARA" gen-model --preset qwen3-0.6b --arch qwen3 --type Q4_K_M -o "$Q" >"$tmp/gen.log" 2>&1 &
genpid=$!

# the answers of an output, one "custom_id<TAB>line" per request, sorted,
# without the timestamp (the only field that may change between runs)
answers() { sed -e 's/"created":[0-9]*,//' "$1" | sed -e 's/^.*"custom_id":\("[^"]*"\|null\).*$/\1\t&/' | LC_ALL=C sort; }
ids() { grep -o '"custom_id":"[^"]*"' "$1" | LC_ALL=C sort; }
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
num() { grep -o "\"$1\":[0-9.]*" "$2" | head -n 1 | cut -d: -f2; }
# same A B: two outputs hold the same custom_ids with byte-identical lines;
# otherwise name the first custom_id that differs and its first differing byte
same() {
    answers "$1" >"$tmp/same.a"
    answers "$2" >"$tmp/same.b"
    cmp -s "$tmp/same.a" "$tmp/same.b" && return 0
    LC_ALL=C awk -F '\t' -v A="$1" -v B="$2" '
        NR == FNR { a[$1] = $0; next }
        { seen[$1] = 1
          if (!($1 in a)) { print "  " $1 " is in " B " only"; done = 1; exit }
          if (a[$1] != $0) {
              x = a[$1]; i = 1
              while (i <= length(x) && substr(x, i, 1) == substr($0, i, 1)) i++
              o = i - length($1) - 1; s = i > 40 ? i - 40 : 1
              printf "  %s: first difference at byte %d of the line (without \"created\")\n    %s: ...%s\n    %s: ...%s\n", \
                  $1, o, A, substr(x, s, 100), B, substr($0, s, 100)
              done = 1; exit
          } }
        END { if (!done) for (k in a) if (!(k in seen)) { print "  " k " is in " A " only"; exit } }' "$tmp/same.a" "$tmp/same.b"
    return 1
}

# 24 problems in the OpenAI Batch format (no max_tokens: each runs to its end)
tasks="$tmp/tasks.jsonl"
{ sed -n 1,12p "$SRC/tests/data/late-tier1.jsonl"; sed -n 1,12p "$SRC/tests/data/late-tier2.jsonl"; } >"$tasks"
in="$tmp/in.jsonl"
sed -E 's|^\{"id": "([^"]*)", "prompt": "([^"]*)".*$|{"custom_id":"\1","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"\2"}]}}|' \
    "$tasks" >"$in"
n=24
check "the input has $n batch requests" '[ "$(grep -c "^{\"custom_id\":\"kr-t[12]-0[0-9][0-9]\",\"method\"" "$in")" -eq $n ]'
tac "$in" >"$tmp/rev.jsonl"
# reference answers, "custom_id<TAB>answer"
sed -E 's|^\{"id": "([^"]*)", .*"answer": "([^"]*)".*$|\1\t\2|' "$tasks" | LC_ALL=C sort >"$tmp/ref.txt"

batch() { "$KARA" batch -m "$M" -t 1 --no-progress --temp 0 "$@"; }
ok_run() { # rc, output, stats: exit 0, every request answered once, none failed
    [ "$1" -eq 0 ] && [ "$(lines "$2")" -eq $n ] && [ "$(ids "$2" | uniq | wc -l)" -eq $n ] &&
        [ "$(num ok "$3")" = $n ] && [ "$(num failed "$3")" = 0 ]
}
flags_of() {
    case $1 in
    kara_per_window) echo "--kv-method kara --kv-evict per_window" ;;
    lazy) echo "--kv-method lazy --config $tmp/lazy.yaml" ;;
    *) echo "--kv-method $1" ;;
    esac
}
SHARE="--kv-seq-tokens 300"
printf 'baselines:\n  lazy:\n    window: 64\n' >"$tmp/lazy.yaml"

# kill -9 at random moments, each run at another concurrency, then finish
RANDOM=11
kill_resume() { # name, model, input, output, count, pause, final -j, -j of each killed run (one word), flags...
    local name=$1 model=$2 input=$3 out=$4 count=$5 pause=$6 jfin=$7 js=$8 kills=0 before pid j rc
    shift 8
    for j in $js; do
        before=$(lines "$out")
        # not through a shell function: $! must be kara itself
        "$KARA" batch -m "$model" -t 1 --no-progress --temp 0 -i "$input" -o "$out" -j $j "$@" 2>>"$out.err" &
        pid=$!
        # let it answer something (at most a minute), then kill it a random moment later:
        # pause + 0-30 ms (reasoner) or pause + 0-0.4 s (pause 0.5: the 0.6B model)
        for _ in $(seq 1 6000); do
            [ "$(lines "$out")" -gt "$before" ] && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.01
        done
        if [ "$pause" = 0 ]; then sleep "0.0$((RANDOM % 4))"; else sleep "$pause" "0.$((RANDOM % 5))"; fi
        if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
        wait $pid 2>/dev/null
    done
    "$KARA" batch -m "$model" -t 1 --no-progress --temp 0 -i "$input" -o "$out" -j $jfin "$@" 2>>"$out.err"
    rc=$?
    echo "$name: killed with -9 $kills times; $(grep -c 'already answered' "$out.err") runs resumed, $(grep -c 'torn last line' "$out.err") torn lines cut"
    local nj=$(echo $js | wc -w) need=$(( $(echo $js | wc -w) - 2 ))
    [ $need -lt 1 ] && need=1
    check "$name: after $kills of $nj runs were killed with -9 (>= $need), the final run exits 0 (rc $rc)" \
        '[ $rc -eq 0 ] && [ $kills -ge $need ]'
    check "$name: some runs resumed a partial output" 'grep -q "requests already answered" "$out.err"'
    check "$name: every custom_id exactly once after the kills" \
        '[ "$(lines "$out")" -eq $count ] && [ "$(ids "$out" | uniq | wc -l)" -eq $count ]'
}

# 1. every method under a share of 300 slots
methods="full kara kara_per_window chunkkv recent random snapkv h2o streaming rkv lazy"
# killed and resumed: one of each kind of state a sequence carries (windows
# scored on demand, per-window events, a seeded generator, one threshold
# event, scores accumulated every token, a step count and recurrence state)
KILLED="kara kara_per_window random snapkv h2o lazy"
for m in $methods; do
    f=$(flags_of $m)
    t0=$SECONDS
    for j in 1 8; do
        batch -i "$in" -o "$tmp/$m-j$j.jsonl" -j $j $SHARE $f --stats-json "$tmp/$m-j$j.json" 2>"$tmp/$m-j$j.err"
        rc=$?
        check "$m -j $j: exits 0, all $n answered (rc $rc)" 'ok_run $rc "$tmp/$m-j$j.jsonl" "$tmp/$m-j$j.json"'
        if [ $m = full ]; then
            check "$m -j $j: nothing evicted" '[ "$(num kv_slots_evicted "$tmp/$m-j$j.json")" = 0 ]'
        else
            check "$m -j $j: slots evicted ($(num kv_slots_evicted "$tmp/$m-j$j.json")), share 300" \
                '[ "$(num kv_slots_evicted "$tmp/$m-j$j.json")" -gt 0 ] && [ "$(num kv_seq_tokens "$tmp/$m-j$j.json")" = 300 ]'
        fi
    done
    check "$m: peak running at -j 8 is 8 ($(num peak_running "$tmp/$m-j8.json"))" \
        '[ "$(num peak_running "$tmp/$m-j8.json")" = 8 ]'
    check "$m: -j 1 and -j 8 byte-identical" 'same "$tmp/$m-j1.jsonl" "$tmp/$m-j8.jsonl"'
    batch -i "$tmp/rev.jsonl" -o "$tmp/$m-rev.jsonl" -j 8 $SHARE $f 2>/dev/null
    check "$m: input in reverse order at -j 8 byte-identical" 'same "$tmp/$m-j1.jsonl" "$tmp/$m-rev.jsonl"'
    case " $KILLED " in
    *" $m "*)
        kill_resume "$m" "$M" "$in" "$tmp/$m-kill.jsonl" $n 0 8 "1 8 3 5" $SHARE $f
        check "$m: answers after the kills byte-identical to the clean -j 1 run" \
            'same "$tmp/$m-j1.jsonl" "$tmp/$m-kill.jsonl"'
        ;;
    esac
    echo "$m: $((SECONDS - t0)) s"
done
# the methods really differ: eviction changed some answers. With the
# model's retention prior (the default) kara on demand and per_window answer
# these 24 as full does here; that is not asserted, since another ISA's
# rounding may move a score across a cut. Without the prior both change
# answers, and differently from each other.
for m in snapkv h2o streaming; do
    check "$m under the share answers differently from full" '! same "$tmp/full-j1.jsonl" "$tmp/$m-j1.jsonl" >/dev/null'
done
batch -i "$in" -o "$tmp/kara-noprior.jsonl" -j 8 $SHARE --kv-method kara --kv-prior-weight 0 2>/dev/null
batch -i "$in" -o "$tmp/kara_per_window-noprior.jsonl" -j 8 $SHARE --kv-method kara --kv-evict per_window \
    --kv-prior-weight 0 2>/dev/null
check "kara without the prior under the share answers differently from full" \
    '! same "$tmp/full-j1.jsonl" "$tmp/kara-noprior.jsonl" >/dev/null'
check "kara per_window without the prior answers differently from on demand" \
    '! same "$tmp/kara-noprior.jsonl" "$tmp/kara_per_window-noprior.jsonl" >/dev/null'
# preemption: 8 sequences admitted on free blocks alone under 3.5 MiB for
# kara (whose 128-token buffer's query rings take 2.7 MB of it) and 2.5 MiB
# for snapkv: about 50 blocks of 16 slots each (with on_pool_exhausted:
# preempt, the default, no sequence gives slots to another: per_window's
# events are never forced by a neighbour)
for m in kara kara_per_window snapkv; do
    case $m in snapkv) budget=2560KiB ;; *) budget=3584KiB ;; esac
    batch -i "$in" -o "$tmp/$m-pre.jsonl" -j 8 $SHARE $(flags_of $m) --kv-budget $budget --optimistic --no-fit \
        --stats-json "$tmp/$m-pre.json" 2>"$tmp/$m-pre.err"
    rc=$?
    check "$m preempted: exits 0, all $n answered (rc $rc)" 'ok_run $rc "$tmp/$m-pre.jsonl" "$tmp/$m-pre.json"'
    check "$m preempted: preemptions counted ($(num preemptions "$tmp/$m-pre.json"))" \
        '[ "$(num preemptions "$tmp/$m-pre.json")" -gt 0 ]'
    check "$m preempted: byte-identical to the clean -j 1 run" 'same "$tmp/$m-j1.jsonl" "$tmp/$m-pre.jsonl"'
done

# 2. the defaults: no KV flags
for j in 1 8; do
    batch -i "$in" -o "$tmp/def-j$j.jsonl" -j $j --stats-json "$tmp/def-j$j.json" 2>"$tmp/def-j$j.err"
    rc=$?
    check "defaults -j $j: exits 0, all $n answered (rc $rc)" 'ok_run $rc "$tmp/def-j$j.jsonl" "$tmp/def-j$j.json"'
    check "defaults -j $j: kara on demand, nothing evicted, nothing reserved" \
        'grep -q "\"method\":\"kara\",\"evict\":\"on_demand\"" "$tmp/def-j$j.json" && [ "$(num kv_slots_evicted "$tmp/def-j$j.json")" = 0 ] && [ "$(num kv_reserved_bytes "$tmp/def-j$j.json")" = 0 ]'
done
check "defaults: -j 1 and -j 8 byte-identical" 'same "$tmp/def-j1.jsonl" "$tmp/def-j8.jsonl"'
# the content after the thinking, "custom_id<TAB>answer" (leading newlines dropped)
sed -n 's/^.*"custom_id":"\([^"]*\)".*"message":{"role":"assistant","content":"\([^"]*\)".*$/\1\t\2/p' \
    "$tmp/def-j1.jsonl" | sed -e 's/\t\(\\n\)*/\t/' | LC_ALL=C sort >"$tmp/def-answers.txt"
check "defaults: all $n answers are the reference answers" 'cmp -s "$tmp/ref.txt" "$tmp/def-answers.txt" || diff "$tmp/ref.txt" "$tmp/def-answers.txt"'

# 3. full, no -n: every request is answered
for j in 1 8; do
    batch -i "$in" -o "$tmp/fullnon-j$j.jsonl" -j $j --kv-method full --stats-json "$tmp/fullnon-j$j.json" \
        2>"$tmp/fullnon-j$j.err"
    rc=$?
    check "full, no -n, -j $j: exits 0, all $n answered (rc $rc)" \
        'ok_run $rc "$tmp/fullnon-j$j.jsonl" "$tmp/fullnon-j$j.json" || head -n 3 "$tmp/fullnon-j$j.err" "$tmp/fullnon-j$j.jsonl"'
done
check "full: -j 1 and -j 8 byte-identical" 'same "$tmp/fullnon-j1.jsonl" "$tmp/fullnon-j8.jsonl"'
check "defaults byte-identical to full" 'same "$tmp/fullnon-j1.jsonl" "$tmp/def-j1.jsonl"'
echo "parts 1-3: $((SECONDS - start)) s"

# 4. a quantized model of Qwen3-0.6B's shape
wait $genpid
rc=$?
genpid=""
check "gen-model qwen3-0.6b Q4_K_M exits 0 (rc $rc)" '[ $rc -eq 0 ] && [ -s "$Q" ] || cat "$tmp/gen.log"'
echo "gen-model done at $((SECONDS - start)) s"
qin="$tmp/q.jsonl"
for i in 1 2 3 4; do echo "{\"id\":\"q$i\",\"prompt\":\"Request $i: $(printf 'ab %.0s' $(seq 1 $i))\"}"; done >"$qin"
QF="--ignore-eos -n 40 --kv-seq-tokens 72 --kv-interval 16 --kv-buffer 4"
for m in kara h2o; do
    for j in 1 4; do
        "$KARA" batch -m "$Q" -t 1 --no-progress --temp 0 -i "$qin" -o "$tmp/q-$m-j$j.jsonl" -j $j $QF --kv-method $m \
            --stats-json "$tmp/q-$m-j$j.json" 2>"$tmp/q-$m-j$j.err"
        rc=$?
        check "0.6B $m -j $j: exits 0, 4 answered with 40 tokens each (rc $rc)" \
            '[ $rc -eq 0 ] && [ "$(num ok "$tmp/q-$m-j$j.json")" = 4 ] && [ "$(grep -c "\"completion_tokens\":40," "$tmp/q-$m-j$j.jsonl")" -eq 4 ]'
        check "0.6B $m -j $j: events ($(num kv_events "$tmp/q-$m-j$j.json")) and evictions ($(num kv_slots_evicted "$tmp/q-$m-j$j.json"))" \
            '[ "$(num kv_events "$tmp/q-$m-j$j.json")" -gt 0 ] && [ "$(num kv_slots_evicted "$tmp/q-$m-j$j.json")" -gt 0 ]'
    done
    check "0.6B $m: -j 1 and -j 4 byte-identical" 'same "$tmp/q-$m-j1.jsonl" "$tmp/q-$m-j4.jsonl"'
done
# killed at -j 2 while the last two requests decode, resumed at -j 4
kill_resume "0.6B kara" "$Q" "$qin" "$tmp/q-kill.jsonl" 4 0.5 4 2 $QF --kv-method kara
check "0.6B kara: answers after the kill byte-identical to the clean -j 1 run" \
    'same "$tmp/q-kara-j1.jsonl" "$tmp/q-kill.jsonl"'

echo "$((SECONDS - start)) s; $pass passed, $fail failed"
[ "$fail" -eq 0 ]
