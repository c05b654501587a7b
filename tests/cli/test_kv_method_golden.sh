#!/usr/bin/env bash
# Every KV method does today what it did when the methods were split into
# runtime/kv/methods/ (0b30ba4): on the shipped reasoning model, 2
# problems under a share of 300 slots that both outgrow (kara threshold
# with interval 64 and buffer 32, lazy with window 32), each method's
# answers (the output lines without "created", the request hash (canonical
# since 0b30ba4) and the newlines 0b30ba4 put before an answer's content;
# cksum), compression events
# and evicted slots (--stats-json) equal the golden table below, recorded
# with 0b30ba4's build. A change to any method's behaviour fails here;
# tools/kv_identity_check.sh compares two builds in full (more problems,
# stories260K). Run with PRINT=1 to print the table of this build.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
# method: cksum of the answers, events, evicted slots
golden="
full 733344043 0 0
kara 733344043 16 662
kara_per_window 733344043 6 639
kara_threshold 1733237893 21 1344
chunkkv 2727578245 16 662
recent 1112372729 17 696
random 1952179150 16 662
snapkv 1711926503 6 768
h2o 3525021833 640 640
streaming 4278704543 2355 2355
rkv 1711926503 6 768
lazy 4064379250 21 672
"
printf 'baselines:\n  lazy:\n    window: 32\n' >"$tmp/lazy.yaml"
sed -n 1,2p "$SRC/tests/data/late-tier2.jsonl" |
    sed -E 's|^\{"id": "([^"]*)", "prompt": "([^"]*)".*$|{"custom_id":"\1","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"\2"}]}}|' \
        >"$tmp/in.jsonl"
flags_of() {
    case $1 in
    kara_per_window) echo "--kv-method kara --kv-evict per_window" ;;
    kara_threshold) echo "--kv-method kara --kv-trigger threshold --kv-interval 64 --kv-buffer 32" ;;
    lazy) echo "--kv-method lazy --config $tmp/lazy.yaml" ;;
    *) echo "--kv-method $1" ;;
    esac
}
num() { grep -o "\"$1\":[0-9]*" "$2" | head -n 1 | cut -d: -f2; }
echo "$golden" | while read -r m sum events evicted; do
    [ -n "$m" ] || continue
    rm -f "$tmp/out.jsonl"
    # shellcheck disable=SC2046
    "$KARA" batch -m "$M" -t 1 -j 1 --no-progress --temp 0 -i "$tmp/in.jsonl" -o "$tmp/out.jsonl" \
        --stats-json "$tmp/stats.json" --kv-seq-tokens 300 $(flags_of "$m") >"$tmp/log" 2>&1
    rc=$?
    got_sum=$(sed -e 's/"created":[0-9]*,//' -e 's/"content":"\(\\n\)*/"content":"/' \
        -e 's/"kara_request_hash":"[0-9a-f]*"//' "$tmp/out.jsonl" |
        LC_ALL=C sort | cksum | cut -d' ' -f1)
    got="$got_sum $(num kv_events "$tmp/stats.json") $(num kv_slots_evicted "$tmp/stats.json")"
    if [ -n "${PRINT:-}" ]; then
        echo "$m $got"
        continue
    fi
    check "$m exits 0 (rc $rc)" '[ $rc -eq 0 ]'
    check "$m: answers, events and evictions $got, golden $sum $events $evicted" '[ "$got" = "$sum $events $evicted" ]'
    echo "$pass $fail" >"$tmp/counts"
done
[ -n "${PRINT:-}" ] && exit 0
read -r pass fail <"$tmp/counts"
finish
