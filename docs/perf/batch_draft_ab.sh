#!/bin/bash
# kara batch with --spec none | ngram | draft alternated, concurrency 1 and 4, one thread:
#   docs/perf/batch_draft_ab.sh KARA MODEL.gguf DRAFT.gguf REQUESTS.jsonl OUTDIR
# 2026-12-03 night: MODEL tools/train/model/kara-reasoner-1m.gguf, DRAFT its copy from
# `kara quantize -q MODEL DRAFT Q4_0`, REQUESTS the 10 tier-4 problems of
# `python3 tools/train/tasks.py --tier 4 --n 10 --seed 10801` as chat requests (max_tokens 1400).
# Output: batch_draft_ab_2026-12-03.txt.
K=${1:?kara binary}; M=${2:?model}; D=${3:?draft model}; I=${4:?requests}; O=${5:?output dir}
mkdir -p "$O"
date -u; $K bench --membw -t 1 2>&1 | tail -1
for r in 1 2 3; do for j in 1 4; do for mode in none ngram draft; do
  rm -f "$O/out-$mode-$j-$r.jsonl"
  $K batch -m "$M" -t 1 --no-progress -i "$I" -o "$O/out-$mode-$j-$r.jsonl" -j $j --temp 0 --kv-method full \
    --spec $mode -md "$D" --stats-json "$O/s.json" 2>/dev/null
  python3 -c "import json; s=json.load(open('$O/s.json')); print('round $r j $j $mode', 'tok/s %.0f' % s['tokens_per_second'], 'steps', s['steps'], 'drafted', s['spec_drafted'], 'accepted', s['spec_accepted'], 'draft_s %.3f' % s['spec_draft_seconds'], 'decode_s %.3f' % s['decode_seconds'])"
  cmp -s <(sed -e 's/"created":[0-9]*,//' "$O/out-none-$j-$r.jsonl" | sort) \
         <(sed -e 's/"created":[0-9]*,//' "$O/out-$mode-$j-$r.jsonl" | sort) || echo "  ANSWERS DIFFER from --spec none"
done; done; done
date -u; $K bench --membw -t 1 2>&1 | tail -1
