#!/usr/bin/env bash
# kv_identity_check.sh OLD_KARA NEW_KARA [SOURCE_DIR]
#
# Runs every KV method through two builds of `kara batch` under budgets that
# force evictions and compares, method by method, the answers (byte for
# byte, without the "created" timestamp and the fields whose format changed
# since 0b30ba4, see answers()), the compression events and the
# evicted slots (--stats-json kv_events, kv_slots_evicted). Used when the
# KV code is reorganised: a move must change nothing a method does.
#
#  - the shipped reasoning model on 4 problems, a share of 300 slots;
#  - stories260K (../shared/models, or $KARA_SHARED/models) on 4 prompts of
#    200 tokens each under a share of 160 slots (interval 32, buffer 8);
#    skipped with a message when the model is absent.
#
# Exits 0 when every method matches, 1 (after naming each difference)
# otherwise, 64 on usage errors. Runs with one thread.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 OLD_KARA NEW_KARA [SOURCE_DIR]" >&2
    exit 64
fi
OLD=$1
NEW=$2
SRC=${3:-$(cd "$(dirname "$0")/.." && pwd)}
SHARED=${KARA_SHARED:-$SRC/../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
methods="full kara kara_per_window kara_threshold chunkkv recent random snapkv h2o streaming rkv lazy"

flags_of() {
    case $1 in
    kara_per_window) echo "--kv-method kara --kv-evict per_window" ;;
    kara_threshold) echo "--kv-method kara --kv-trigger threshold --kv-interval 64 --kv-buffer 32" ;;
    lazy) echo "--kv-method lazy --config $tmp/lazy.yaml" ;;
    *) echo "--kv-method $1" ;;
    esac
}
num() { grep -o "\"$1\":[0-9.]*" "$2" | head -n 1 | cut -d: -f2; }
# the request hash and the newlines before an answer's content changed
# format after 0b30ba4 (canonical JSON; content starts at the text)
answers() {
    sed -e 's/"created":[0-9]*,//' -e 's/"content":"\(\\n\)*/"content":"/' \
        -e 's/"kara_request_hash":"[0-9a-f]*"//' "$1" | LC_ALL=C sort
}

# compare NAME MODEL INPUT FLAGS...: both builds, one method
compare() {
    local name=$1 model=$2 input=$3 b rc
    shift 3
    for b in old new; do
        local bin=$OLD
        [ $b = new ] && bin=$NEW
        rm -f "$tmp/$b.out"
        "$bin" batch -m "$model" -t 1 -j 1 --no-progress --temp 0 -i "$input" -o "$tmp/$b.out" \
            --stats-json "$tmp/$b.json" "$@" >"$tmp/$b.log" 2>&1
        echo $? >"$tmp/$b.rc"
        answers "$tmp/$b.out" >"$tmp/$b.ans" 2>/dev/null
    done
    local ev_o ev_n sl_o sl_n
    ev_o=$(num kv_events "$tmp/old.json" 2>/dev/null)
    ev_n=$(num kv_events "$tmp/new.json" 2>/dev/null)
    sl_o=$(num kv_slots_evicted "$tmp/old.json" 2>/dev/null)
    sl_n=$(num kv_slots_evicted "$tmp/new.json" 2>/dev/null)
    if cmp -s "$tmp/old.ans" "$tmp/new.ans" && cmp -s "$tmp/old.rc" "$tmp/new.rc" && [ "$ev_o" = "$ev_n" ] &&
        [ "$sl_o" = "$sl_n" ]; then
        printf 'same  %-34s exit %s, %s events, %s slots evicted\n' "$name" "$(cat "$tmp/old.rc")" "${ev_o:-?}" "${sl_o:-?}"
    else
        printf 'DIFF  %-34s exit %s/%s, events %s/%s, evicted %s/%s\n' "$name" "$(cat "$tmp/old.rc")" \
            "$(cat "$tmp/new.rc")" "${ev_o:-?}" "${ev_n:-?}" "${sl_o:-?}" "${sl_n:-?}"
        diff "$tmp/old.ans" "$tmp/new.ans" | head -n 4 | cut -c1-200
        fail=1
    fi
}

printf 'baselines:\n  lazy:\n    window: 32\n' >"$tmp/lazy.yaml"
# stories260K's prompts take about 60 slots in the chatml template: the
# threshold baselines get small slacks so that a share of 160 holds them
printf 'baselines:\n  snapkv:\n    trigger_slack: 16\n  rkv:\n    trigger_slack: 16\n  lazy:\n    window: 16\n' \
    >"$tmp/small.yaml"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
sed -n 1,4p "$SRC/tests/data/late-tier2.jsonl" |
    sed -E 's|^\{"id": "([^"]*)", "prompt": "([^"]*)".*$|{"custom_id":"\1","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"\2"}]}}|' \
        >"$tmp/reasoner.jsonl"
for m in $methods; do
    # shellcheck disable=SC2046
    compare "reasoner/$m" "$M" "$tmp/reasoner.jsonl" $(flags_of "$m") --kv-seq-tokens 300
done

S="$SHARED/models/stories260K.gguf"
if [ -f "$S" ]; then
    for i in 1 2 3 4; do
        printf '{"id":"s%d","prompt":"Once upon a time, there was a little %s"}\n' $i \
            "$(echo "girl dog bird boy" | cut -d' ' -f$i)"
    done >"$tmp/stories.jsonl"
    for m in $methods; do
        # shellcheck disable=SC2046
        compare "stories260K/$m" "$S" "$tmp/stories.jsonl" $(flags_of "$m" | sed "s|$tmp/lazy.yaml|$tmp/small.yaml|") \
            --config "$tmp/small.yaml" --kv-seq-tokens 160 --kv-interval 32 --kv-buffer 8 -n 200 --ignore-eos
    done
else
    echo "skipped stories260K: $S is absent (set KARA_SHARED)"
fi
[ $fail -eq 0 ] && echo "every method: the same answers, events and evicted slots"
exit $fail
