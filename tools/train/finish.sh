#!/usr/bin/env bash
# Export a run's best checkpoint, evaluate it and collect the shipped files.
#   tools/train/finish.sh [RUN_DIR]   (default tools/train/runs/main)
# Writes tools/train/model/: kara-reasoner-1m.gguf, config.json, loss.csv,
# eval.csv, loss.svg, eval.jsonl (accuracy per tier and KV policy).
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-tools/train/runs/main}
out=tools/train/model
py="nice -n 15 /usr/bin/python3"
mkdir -p "$out"
$py tools/train/export_gguf.py "$run/best.pt" "$out/kara-reasoner-1m.gguf"
cp "$run/config.json" "$out/config.json"
cp "$run/eval.csv" "$out/eval.csv"
$py - "$run/loss.csv" "$out/loss.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
last = {int(r[0]): r for r in rows[1:]}
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f); w.writerow(rows[0]); [w.writerow(last[k]) for k in sorted(last)]
PY
$py tools/train/plot_loss.py "$run" "$out/loss.svg"
rm -f "$out/eval.jsonl"
$py tools/train/evaluate.py --model "$run/best.pt" --json "$out/eval.jsonl" \
    --tasks tests/data/reasoning-tier{1,2,3,4}.jsonl --policy full
$py tools/train/evaluate.py --model "$run/best.pt" --json "$out/eval.jsonl" \
    --tasks tests/data/reasoning-tier4.jsonl --policy oracle recent --retention 0.2
$py tools/train/check_llamacpp.py "$out/kara-reasoner-1m.gguf" "$run/best.pt" \
    --tasks tests/data/reasoning-tier4.jsonl || true
