#!/bin/bash
# kara batch --spec none | ngram under Kara's compression (eviction on demand, shares of 640 slots, about
# half of what a request holds at its peak), alternated, concurrency 1 and 4, one thread:
#   docs/perf/batch_spec_kara_ab.sh KARA MODEL.gguf REQUESTS.jsonl OUTDIR
# 2026-12-03 night: MODEL tools/train/model/kara-reasoner-1m.gguf, REQUESTS the 10 tier-4 problems of
# `python3 tools/train/tasks.py --tier 4 --n 10 --seed 10801` as chat requests (max_tokens 1400).
# Output: batch_spec_kara_ab_2026-12-03.txt.
K=${1:?kara binary}; M=${2:?model}; I=${3:?requests}; O=${4:?output dir}
mkdir -p "$O"
date -u; $K bench --membw -t 1 2>&1 | tail -1
for r in 1 2 3; do for j in 1 4; do for mode in none ngram; do
  rm -f "$O/k-$mode-$j-$r.jsonl"
  $K batch -m "$M" -t 1 --no-progress -i "$I" -o "$O/k-$mode-$j-$r.jsonl" -j $j --temp 0 --kv-method kara \
    --kv-seq-tokens 640 --spec $mode --stats-json "$O/s.json" 2>/dev/null
  python3 -c "import json; s=json.load(open('$O/s.json')); print('round $r j $j $mode', 'tok/s %.0f' % s['tokens_per_second'], 'steps', s['steps'], 'kv_events', s['kv_events'], 'evicted', s['kv_slots_evicted'], 'spec_on', s['spec_on'], 'drafted', s['spec_drafted'], 'accepted', s['spec_accepted'])"
  cmp -s <(sed -e 's/"created":[0-9]*,//' "$O/k-none-$j-$r.jsonl" | sort) \
         <(sed -e 's/"created":[0-9]*,//' "$O/k-$mode-$j-$r.jsonl" | sort) || echo "  ANSWERS DIFFER from --spec none"
done; done; done
date -u; $K bench --membw -t 1 2>&1 | tail -1
