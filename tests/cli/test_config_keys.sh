#!/usr/bin/env bash
# `kara config keys`: every key of the schema is listed once, with its type,
# default, the values it takes and a help line (core rows and the rows each
# KV method declares in its own file alike), a prefix keeps the keys under
# it, and a prefix with no key under it is a usage error.
set -u
. "$(dirname "$0")/lib/common.sh"

"$KARA" config keys >"$tmp/all" 2>"$tmp/err"
check "exit 0" "[ $? -eq 0 ]"
check "header" "head -n 1 '$tmp/all' | grep -Eq '^key +type +default +values: help$'"
# the keys --print-config writes (nested YAML, flattened) are the keys listed, in the same order
"$KARA" run --print-config 2>/dev/null | awk '
    /^#/ || NF == 0 { next }
    { match($0, /^ */); d = RLENGTH / 2; k = $1; sub(/:$/, "", k); path[d] = k
      if ($2 != "" && $2 !~ /^#/) { s = path[0]; for (i = 1; i <= d; i++) s = s "." path[i]; print s } }' >"$tmp/printed"
tail -n +2 "$tmp/all" | awk '{print $1}' >"$tmp/listed"
check "the listed keys are the schema's ($(wc -l <"$tmp/listed") listed, $(wc -l <"$tmp/printed") printed)" \
    "cmp -s '$tmp/printed' '$tmp/listed'"
check "every key has a help line" "! tail -n +2 '$tmp/all' | grep -Eq ': *$'"
line() { grep -E "^$1 " "$tmp/all" | tr -s ' '; }
check "a core key" \
    "[ \"\$(line kv_cache.block_size)\" = 'kv_cache.block_size integer 16 1..4096: slots per block' ]"
check "a size" "line kv_cache.budget | grep -qF 'size 1GiB 1B..1PiB or auto: hard cap on KV bytes'"
check "kara's own key" \
    "[ \"\$(line kara.t2c.max_gap)\" = 'kara.t2c.max_gap integer 16 0..65536: longest gap a chunk may fill' ]"
check "a baseline's key" "line baselines.snapkv.pool | grep -qF 'name max max | mean: pooling of scores over the kernel'"
check "a list" "line kara.protect_token_ids | grep -qF 'list [] at most 16 of 0..2147483647: tokens always kept'"

"$KARA" config keys baselines.rkv >"$tmp/rkv"
check "prefix: rkv's six keys" "[ \$(tail -n +2 '$tmp/rkv' | grep -c '^baselines\.rkv\.') -eq 6 ] && [ \$(wc -l <'$tmp/rkv') -eq 7 ]"
expect_stderr "a prefix with no key" 64 "kara config keys: no key is under 'kara.scor'" "$KARA" config keys kara.scor
expect_stderr "no subcommand" 64 "usage: kara config keys [PREFIX]" "$KARA" config
finish
