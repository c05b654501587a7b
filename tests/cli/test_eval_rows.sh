#!/usr/bin/env bash
# `kara eval`'s rows are caps on peak KV bytes, each problem capped at its share of full's peak on it (issue 46): on 3 problems of
# the shipped reasoning model, the old trap (--methods full,kara,snapkv
# --retentions 0.2, which ran only kara/per_window of Kara and snapkv with no
# budget) now runs every method asked for in the retention row, each either
# per window at the retention or capped at kara/per_window's peak bytes; the
# CSV starts method,row,share,accuracy,peak_share and the JSON has the same
# fields; in budget rows the peak bytes stay within the cap (no tolerance:
# the cap is kv.budget itself, which the library never exceeds); a cap no
# method fits gives error rows with the reason and exit 1, and so does a
# retention whose reference ran nothing; a per-window suffix on a method
# without windows is a usage error; `none` for --retentions means no rows.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
M="$SRC/tools/train/model/kara-reasoner-1m.gguf"
python3 "$SRC/tools/train/tasks.py" --family reuse --tier 2 --n 3 --seed 4601 --out "$tmp/t.jsonl" || exit 1
ev() { "$KARA" eval -m "$M" -t 1 -c 1024 --tasks "$tmp/t.jsonl" "$@"; }

# 1. the old trap: every method asked for runs in the retention row, none unbudgeted
ev --methods full,kara,snapkv --budgets none --retentions 0.2 --out "$tmp/r.csv" >"$tmp/r.txt" 2>"$tmp/r.err"
rc=$?
check "retention row exits 0 (rc $rc)" '[ $rc -eq 0 ]'
check "the CSV starts method,row,share,accuracy,peak_share" \
    '[ "$(head -1 "$tmp/r.csv" | cut -d, -f1-5)" = "method,row,share,accuracy,peak_share" ]'
# method,row,share,evict,cap_bytes,peak_bytes,status of each row
python3 - "$tmp/r.csv" >"$tmp/r.rows" <<'EOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["method"], r["row"], r["share"], r["evict"], r["cap_bytes"], r["peak_bytes"], r["status"])
EOF
check "rows: full, then kara/per_window, kara and snapkv at r 0.2 ($(tr '\n' ';' <"$tmp/r.rows"))" \
    '[ "$(awk "{ print \$1, \$2, \$3 }" "$tmp/r.rows" | tr "\n" ";")" = "full - 1.000;kara/per_window retention 0.200;kara retention 0.200;snapkv retention 0.200;" ]'
check "no retention row runs unbudgeted: per window at r, or capped at kara/per_window's peak bytes" \
    '[ "$(awk "\$2 == \"retention\" && !(\$4 == \"per_window\" && \$1 == \"kara/per_window\") && \$5 == 0" "$tmp/r.rows" | wc -l)" -eq 0 ]'
ref=$(awk '$1 == "kara/per_window" { print $6 }' "$tmp/r.rows")
check "kara and snapkv are capped at kara/per_window's peak ($ref bytes) and stay within it" \
    '[ -n "$ref" ] && [ "$(awk -v ref="$ref" "\$2 == \"retention\" && \$1 != \"kara/per_window\" && \$5 == ref && \$6 + 0 <= ref + 0 && \$7 == \"ok\"" "$tmp/r.rows" | wc -l)" -eq 2 ]'
check "the retention rows evicted (events > 0)" \
    '[ "$(grep -E "r=0\.20" "$tmp/r.txt" | awk "\$13 > 0" | wc -l)" -eq 3 ]'

# 2. budget rows: within the cap; a cap nothing fits is an error row and exit 1
ev --methods full,kara,snapkv,h2o --budgets 0.95,0.05 --out "$tmp/b.csv" --plot "$tmp/b.svg" >"$tmp/b.txt" 2>"$tmp/b.err"
rc=$?
ev --methods full,kara,snapkv,h2o --budgets 0.95,0.05 --out "$tmp/b.json" >/dev/null 2>&1
check "an unfittable cap exits 1 and says so (rc $rc)" \
    '[ $rc -eq 1 ] && grep -q "3 of 7 rows are error rows" "$tmp/b.err"'
python3 - "$tmp/b.csv" >"$tmp/b.rows" <<'EOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["method"], r["row"], r["share"], r["peak_share"], r["cap_bytes"], r["peak_bytes"], r["status"],
          "too small" in r["error"] or "cannot hold this request" in r["error"])
EOF
check "budget rows: peak bytes <= cap and peak_share <= share ($(tr '\n' ';' <"$tmp/b.rows"))" \
    '[ "$(awk "\$2 == \"budget\" && \$6 + 0 <= \$5 + 0 && \$4 + 0 <= \$3 + 0" "$tmp/b.rows" | wc -l)" -eq 6 ]'
check "share 0.95: every method ran (status ok)" \
    '[ "$(awk "\$2 == \"budget\" && \$3 == \"0.950\" && \$7 == \"ok\"" "$tmp/b.rows" | wc -l)" -eq 3 ]'
check "share 0.05: every method is an error row saying the budget is too small or cannot hold the request" \
    '[ "$(awk "\$2 == \"budget\" && \$3 == \"0.050\" && \$7 == \"error\" && \$8 == \"True\"" "$tmp/b.rows" | wc -l)" -eq 3 ]'
check "the table marks the error rows" '[ "$(grep -c "error row: 3 of 3 problems could not run" "$tmp/b.txt")" -eq 3 ]'
python3 - "$tmp/b.json" "$tmp/b.csv" >"$tmp/same" <<'EOF'
import csv, json, sys
j = json.load(open(sys.argv[1]))
c = list(csv.DictReader(open(sys.argv[2])))
key = lambda r: (r["method"], r["row"], float(r["share"]), float(r["accuracy"]), float(r["peak_share"]), r["status"],
                 int(r["cap_bytes"]), int(r["peak_bytes"]))
print(len(j) == len(c) == 7 and [key(r) for r in j] == [key(r) for r in c])
EOF
check "the JSON holds the same rows and fields as the CSV" '[ "$(cat "$tmp/same")" = True ]'
check "the plot leaves the error rows out (3 methods, one point each, plus full)" \
    '[ "$(grep -c "<circle" "$tmp/b.svg")" -eq 3 ]'

# 3. a per-window suffix on a method without windows is a usage error
expect_stderr "snapkv/per_window is refused" 64 "snapkv has no per-window eviction" \
    "$KARA" eval -m "$M" --tasks "$tmp/t.jsonl" --methods full,snapkv/per_window --retentions 0.2

# 4. a retention whose kara/per_window runs no problem (a share below its buffer) leaves nothing to
#    cap the other methods at: they are refused with the reason, not run unbudgeted
ev --methods full,snapkv --budgets none --retentions 0.2 --kv-seq-tokens 100 --out "$tmp/n.csv" >"$tmp/n.txt" 2>"$tmp/n.err"
rc=$?
check "a retention with no reference peak exits 1 (rc $rc)" '[ $rc -eq 1 ] && grep -q "2 of 3 rows are error rows" "$tmp/n.err"'
check "snapkv's row there is an error row with the reason" \
    'grep -q "^snapkv,retention,0.200,0.0000,0.0000,0.0000,error,\"kara/per_window ran no problem at this retention" "$tmp/n.csv"'

# 5. "none" is a list of no rows for --retentions as for --budgets (the help's default): full alone;
#    anything else that is not a share in (0, 1] is still refused
ev --methods full,snapkv --budgets none --retentions none --limit 1 --out "$tmp/z.csv" >"$tmp/z.txt" 2>"$tmp/z.err"
rc=$?
check "--retentions none runs full alone (rc $rc)" \
    '[ $rc -eq 0 ] && [ "$(tail -n +2 "$tmp/z.csv" | cut -d, -f1,2)" = "full,-" ]'
expect_stderr "--retentions nothing is refused" 64 "--retentions: bad item 'nothing'" \
    "$KARA" eval -m "$M" --tasks "$tmp/t.jsonl" --retentions nothing

if [ "$fail" -ne 0 ]; then cat "$tmp/r.txt" "$tmp/r.err" "$tmp/b.txt" "$tmp/b.err"; fi
finish
