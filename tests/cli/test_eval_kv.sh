#!/usr/bin/env bash
# `kara eval-kv` on a seeded random-weight tiny model: the CSV has the
# documented columns and one full-width row per run; full against itself
# with another thread count is exact (KL 0, agreement 1, no divergence);
# Kara at retention 1.0 equals full; Kara at 0.3 evicts and keeps part of
# every region; the budget baselines get Kara's mean footprint; per-layer
# selection (A5) runs through its flag; the JSON output holds the same rows;
# --ref-kv-dtype measures a q8_0 cache against an f16 reference; cap rows
# (--budgets) hold every method's peak bytes under its cap, an unfittable
# cap is an error row with exit status 1, and kara.evict_decay below 1
# takes the old windows first; bad methods, retentions and caps are usage
# errors.
set -euo pipefail
kara=${KARA_BIN:?set KARA_BIN to the kara binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
check() {   # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
exit_code() {  # exit_code WANT COMMAND...: the command exits with WANT
    local want=$1; shift
    local rc=0
    "$@" >/dev/null 2>"$dir/err.txt" || rc=$?
    [ "$rc" = "$want" ]
}
# col LABEL RETENTION COLUMN: the value of COLUMN in the CSV row with that
# label and retention ("" for rows without one)
col() {
    awk -F, -v lab="$1" -v ret="$2" -v name="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
        $2 == lab && $3 == ret { print $(idx[name]); exit }' "$dir/out.csv"
}
num_eq() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'; }
num_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }

"$kara" gen-model --preset tiny --arch qwen3 --seed 5 -o "$dir/tiny.gguf" >/dev/null
common=(-m "$dir/tiny.gguf" -c 256 -t 1 --kv-interval 32 --kv-buffer 8 --free-tokens 48 --needle-depths 0.5)
"$kara" eval-kv "${common[@]}" --retention 1.0,0.3 --noise-threads 2 --out "$dir/out.csv" > "$dir/table.txt" 2>"$dir/log.txt"
check "the table lists every method" \
    bash -c "for m in full 'full(t=2)' kara streaming snapkv h2o chunkkv random recent rkv lazy; do grep -qF \"\$m \" '$dir/table.txt' || exit 1; done"

header='method,label,retention,budget_tokens,threads,steps,mean_slots,peak_kv_bytes,kl_mean,kl_max,steps_compressed,kl_mean_compressed,top1_agree,nll_mean,ppl_ratio,first_divergence,free_cap,needle_hits,needle_trials,needle_digits,needle_kept,region_size,region_min,region_kept,events,slots_evicted,event_ms_mean,event_share,decode_tok_s,cap_share,cap_bytes,peak_share,error'
check "CSV header" test "$(head -1 "$dir/out.csv")" = "$header"
check "CSV: header, full, noise, then 9 methods x 2 retentions" test "$(wc -l < "$dir/out.csv")" = 21
check "CSV: every row has the header's 33 columns" \
    bash -c "awk -F, 'NF != 33 { bad = 1 } END { exit bad }' '$dir/out.csv'"

# the noise floor: the forward pass does not depend on the thread count
check "full(t=2): KL 0" num_eq "$(col 'full(t=2)' '' kl_max)" 0
check "full(t=2): top-1 agreement 1" num_eq "$(col 'full(t=2)' '' top1_agree)" 1
check "full(t=2): no greedy divergence" num_eq "$(col 'full(t=2)' '' first_divergence)" 48
check "full(t=2): perplexity ratio 1" num_eq "$(col 'full(t=2)' '' ppl_ratio)" 1
check "full(t=2) ran on 2 threads" num_eq "$(col 'full(t=2)' '' threads)" 2

# retention 1.0: events run but keep everything, so every number equals full's
check "kara r=1: events ran" num_lt 0 "$(col kara 1 events)"
check "kara r=1: nothing evicted" num_eq "$(col kara 1 slots_evicted)" 0
check "kara r=1: KL 0" num_eq "$(col kara 1 kl_max)" 0
check "kara r=1: agreement 1" num_eq "$(col kara 1 top1_agree)" 1
check "kara r=1: no divergence" num_eq "$(col kara 1 first_divergence)" 48
check "kara r=1: every region whole" num_eq "$(col kara 1 region_min)" 1
check "kara r=1: same NLL as full" test "$(col kara 1 nll_mean)" = "$(col full '' nll_mean)"

# retention 0.3: fewer slots, a real difference, part of every region kept
check "kara r=0.3: evicts" num_lt 0 "$(col kara 0.3 slots_evicted)"
check "kara r=0.3: fewer slots than full" num_lt "$(col kara 0.3 mean_slots)" "$(col full '' mean_slots)"
check "kara r=0.3: KL above 0" num_lt 0 "$(col kara 0.3 kl_mean)"
check "kara r=0.3: agreement below 1" num_lt "$(col kara 0.3 top1_agree)" 1
check "kara r=0.3: every region keeps > 10%" num_lt 0.1 "$(col kara 0.3 region_min)"
mean=$(col kara 0.3 mean_slots)
for m in streaming snapkv h2o rkv lazy; do
    check "$m r=0.3: budget = Kara's mean footprint ($mean)" \
        num_eq "$(col $m 0.3 budget_tokens)" "$(awk -v m="$mean" 'BEGIN { printf "%d", m + 0.5 }')"
done
check "streaming r=0.3: holds at most its budget" \
    bash -c "awk -v a='$(col streaming 0.3 mean_slots)' -v b='$(col streaming 0.3 budget_tokens)' 'BEGIN { exit !(a <= b) }'"

# ablation A5 (--kv-selection-scope per_layer): retention 1.0 still equals
# full; at 0.3 the layers choose their own slots, so the figures move, and
# every region keeps a share in every layer (regions: the mean over layers)
shared_kl=$(col kara 0.3 kl_mean)
"$kara" eval-kv "${common[@]}" --methods kara --retention 1.0,0.3 --kv-selection-scope per_layer \
    --out "$dir/out.csv" >/dev/null 2>&1
check "per_layer r=1: same NLL as full" test "$(col kara 1 nll_mean)" = "$(col full '' nll_mean)"
check "per_layer r=1: nothing evicted" num_eq "$(col kara 1 slots_evicted)" 0
check "per_layer r=0.3: evicts" num_lt 0 "$(col kara 0.3 slots_evicted)"
check "per_layer r=0.3: KL differs from shared scope ($shared_kl)" \
    bash -c "! awk -v a='$(col kara 0.3 kl_mean)' -v b='$shared_kl' 'BEGIN { exit !(a + 0 == b + 0) }'"
check "per_layer r=0.3: every region keeps > 10%" num_lt 0.1 "$(col kara 0.3 region_min)"
check "per_layer with trigger threshold exits 78" exit_code 78 "$kara" eval-kv "${common[@]}" --methods kara \
    --kv-selection-scope per_layer --kv-trigger threshold --kv-budget-tokens 64
check "per_layer with trigger threshold: the message names both keys" \
    bash -c "grep -q 'selection_scope: per_layer' '$dir/err.txt' && grep -q 'trigger: threshold' '$dir/err.txt'"
check "a bad selection scope exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --kv-selection-scope sideways

# JSON: same rows, parseable
"$kara" eval-kv "${common[@]}" --methods kara,streaming --retention 0.3 --out "$dir/out.json" >/dev/null 2>&1
if command -v python3 >/dev/null; then
    check "JSON parses with 4 rows (full, noise, kara, streaming)" python3 -c "
import json, sys
d = json.load(open('$dir/out.json'))
labels = [r['label'] for r in d['rows']]
sys.exit(0 if labels[0] == 'full' and labels[2:] == ['kara', 'streaming'] and len(labels) == 4 else 1)"
else
    check "JSON has 4 rows" test "$(grep -c '"method":' "$dir/out.json")" = 4
fi

# KV cache types (issue 20): --ref-kv-dtype f16 keeps the reference in f16 and adds full(q8_0) against it
"$kara" eval-kv "${common[@]}" --methods kara --retention 0.3 --kv-dtype q8_0 --ref-kv-dtype f16 \
    --out "$dir/out.csv" > "$dir/table.txt" 2>/dev/null
check "--ref-kv-dtype: rows full(f16), full(t=2), full(q8_0), kara" \
    test "$(awk -F, 'NR > 1 { printf "%s;", $2 }' "$dir/out.csv")" = "full(f16);full(t=2);full(q8_0);kara;"
check "full(q8_0) against full(f16): KL above 0 and below 0.05" \
    bash -c "awk -v k='$(col 'full(q8_0)' '' kl_mean)' 'BEGIN { exit !(k > 0 && k < 0.05) }'"
check "full(q8_0) holds about 68/128 of f16's peak KV bytes" \
    awk -v a="$(col 'full(q8_0)' '' peak_kv_bytes)" -v b="$(col 'full(f16)' '' peak_kv_bytes)" \
    'BEGIN { exit !(a / b > 0.5 && a / b < 0.56) }'
check "a bad --ref-kv-dtype exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --ref-kv-dtype q5_1

# cap rows (--budgets): every method under a hard cap on its peak KV bytes,
# as a share of full's; each row's peak (cache, rings, scratch) stays under
# it, Kara evicts on demand, and a cap a method cannot fit is an error row
# with exit status 1, the other rows still run
# capc LABEL CAP COLUMN: COLUMN of the cap row of LABEL at CAP
capc() {
    awk -F, -v lab="$1" -v cap="$2" -v name="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
        $2 == lab && $(idx["cap_share"]) == cap { print $(idx[name]); exit }' "$dir/out.csv"
}
"$kara" eval-kv "${common[@]}" --methods kara,streaming,snapkv,h2o --retention 0.3 --budgets 0.8,0.6 \
    --out "$dir/out.csv" > "$dir/table.txt" 2>/dev/null
check "--budgets: 2 full rows, 4 retention rows, 2 caps x 4 methods" test "$(wc -l < "$dir/out.csv")" = 15
for m in kara streaming snapkv h2o; do
    for c in 0.8 0.6; do
        check "$m under cap $c: ran, evicted, peak bytes <= cap bytes, peak_share <= $c" bash -c "
            [ -z '$(capc $m $c error)' ] && awk -v e='$(capc $m $c slots_evicted)' -v p='$(capc $m $c peak_kv_bytes)' \
              -v b='$(capc $m $c cap_bytes)' -v s='$(capc $m $c peak_share)' -v c=$c \
              'BEGIN { exit !(e > 0 && p > 0 && p <= b && s <= c) }'"
    done
done
check "--budgets: cap bytes are the share of full's peak bytes" \
    awk -v b="$(capc kara 0.8 cap_bytes)" -v f="$(col full '' peak_kv_bytes)" 'BEGIN { exit !(b == int(0.8 * f)) }'
check "--budgets: kara holds fewer slots under 0.6 than under 0.8" \
    num_lt "$(capc kara 0.6 mean_slots)" "$(capc kara 0.8 mean_slots)"
check "--budgets: the table has the cap and peak% columns" grep -q "cap budget  slots peak_KiB  peak%" "$dir/table.txt"
check "a cap no method fits exits 1" exit_code 1 "$kara" eval-kv "${common[@]}" --methods kara,streaming \
    --budgets 0.000001 --out "$dir/out.csv"
check "a cap no method fits: stderr says which row and why" grep -q "kara at a cap of 0.00 of full's peak bytes did not run" "$dir/err.txt"
check "a cap no method fits: the rows are error rows in the CSV" \
    bash -c "[ -n '$(capc kara 1e-06 error)' ] && [ -n '$(capc streaming 1e-06 error)' ]"
check "--budgets above 1 exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --budgets 1.5

# kara.evict_decay below 1: under the same cap the oldest windows give up
# their slots first, so the newest region keeps more than at decay 1
printf 'kara:\n  evict_decay: 0.02\n' > "$dir/decay.yaml"
"$kara" eval-kv "${common[@]}" --methods kara --retention 0.3 --budgets 0.8 --region 32 --out "$dir/out.csv" >/dev/null 2>&1
even_last=$(capc kara 0.8 region_kept | awk -F';' '{ print $(NF - 1) }')
even_first=$(capc kara 0.8 region_kept | awk -F';' '{ print $2 }')
"$kara" eval-kv "${common[@]}" --config "$dir/decay.yaml" --methods kara --retention 0.3 --budgets 0.8 --region 32 \
    --out "$dir/out.csv" >/dev/null 2>&1
decay_last=$(capc kara 0.8 region_kept | awk -F';' '{ print $(NF - 1) }')
decay_first=$(capc kara 0.8 region_kept | awk -F';' '{ print $2 }')
check "evict_decay 0.02: a recent region keeps more ($decay_last) than at decay 1 ($even_last)" \
    num_lt "$even_last" "$decay_last"
check "evict_decay 0.02: an old region keeps less ($decay_first) than at decay 1 ($even_first)" \
    num_lt "$decay_first" "$even_first"

# errors
check "unknown method exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --methods full,bogus
check "unknown method: the message names it and the valid methods" \
    bash -c "grep -q bogus '$dir/err.txt' && grep -q snapkv '$dir/err.txt'"
check "retention above 1 exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --retention 1.5
check "--budget-match with a bad value exits 64" exit_code 64 "$kara" eval-kv "${common[@]}" --budget-match most
check "missing text file exits 66" exit_code 66 "$kara" eval-kv "${common[@]}" -f "$dir/none.txt"
check "no model exits 64" exit_code 64 "$kara" eval-kv -f "$dir/none.txt"

echo "$fails failed"
[ "$fails" = 0 ]
