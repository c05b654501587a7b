#!/usr/bin/env bash
# Every KV method is sized for what it holds at once, not for the context:
# on stories260K with a 512-token context and a kv_cache.budget of 384 KiB,
# each method (kara on demand, per_window and threshold among them)
# generates 300 tokens, or refuses with a message that names the smallest
# budget that works (exit 78 or 65); that budget then runs, and one byte
# less is refused. snapkv, whose scorer once held a 32-row tile of the whole
# context for its 8 observation queries, must run. Skipped (77) without
# the shared models.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
S="${KARA_SHARED:-$SRC/../shared}/models/stories260K.gguf"
[ -f "$S" ] || { echo "SKIP: $S is absent (set KARA_SHARED)"; exit 77; }
gen() { # budget, method flags...: kara run, stderr in $tmp/err
    local b=$1
    shift
    "$KARA" run -m "$S" -c 512 --kv-budget "$b" "$@" -n 300 --ignore-eos --temp 0 -t 1 --no-progress \
        -p "Once upon a time" >"$tmp/out" 2>"$tmp/err"
}
for m in full kara kara_per_window kara_threshold chunkkv recent random snapkv h2o streaming rkv lazy; do
    case $m in
    kara_per_window) f="--kv-method kara --kv-evict per_window" ;;
    kara_threshold) f="--kv-method kara --kv-trigger threshold" ;;
    *) f="--kv-method $m" ;;
    esac
    # shellcheck disable=SC2086
    gen 384KiB $f
    rc=$?
    if [ $rc -eq 0 ]; then
        check "$m runs in 384 KiB and writes 300 tokens" '[ -s "$tmp/out" ]'
        continue
    fi
    least=$(grep -o "smallest [a-z_.]* *budget[a-z ]* is [0-9]* bytes\|raise kv_cache.budget to at least [0-9]* bytes" \
        "$tmp/err" | grep -o "[0-9]* bytes" | cut -d' ' -f1)
    echo "$m: refused in 384 KiB (exit $rc), smallest budget named: ${least:-none}"
    check "$m refuses with the smallest budget that works" '[ -n "$least" ] && [ $rc -ne 70 ]'
    [ -n "$least" ] || { sed -n 1,3p "$tmp/err"; continue; }
    # shellcheck disable=SC2086
    gen "$least" $f
    rc=$?
    check "$m runs in the $least bytes it named (exit $rc)" '[ $rc -eq 0 ] && [ -s "$tmp/out" ]'
    # shellcheck disable=SC2086
    gen $((least - 1)) $f
    rc=$?
    check "$m is refused one byte below (exit $rc)" '[ $rc -ne 0 ]'
done
check "snapkv runs in 384 KiB" "gen 384KiB --kv-method snapkv"
finish
