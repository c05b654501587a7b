#!/usr/bin/env bash
# Export a checkpoint, evaluate it and collect the shipped files.
#   tools/train/finish.sh CKPT RUN_DIR...   (RUN_DIRs: the stages, in order, for the loss curve)
# Writes tools/train/model/: kara-reasoner-1m.gguf, config.json (of the last
# stage, with its history), loss.csv + loss.svg (all stages), eval.jsonl
# (greedy full KV on every held-out tier of both families; teacher-forced
# full / oracle / recent on tier 4 of both; with ORACLE=1 also greedy oracle
# and recent on tier 4, which takes about 20 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=$1; shift
out=tools/train/model
py="nice -n 15 /usr/bin/python3"
n=${EVAL_N:-100}
mkdir -p "$out"
$py tools/train/export_gguf.py "$ckpt" "$out/kara-reasoner-1m.gguf"
for r in "$@"; do cp "$r/config.json" "$out/config-$(basename "$r").json"; done
$py tools/train/plot_loss.py "$out/loss.csv" "$out/loss.svg" "$@"
rm -f "$out/eval.jsonl"
$py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --teacher-forced --limit "$n" \
    --tasks tests/data/{late,reuse}-tier4.jsonl --policy full oracle recent --retention 0.1 0.2 0.3
$py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --limit "$n" \
    --tasks tests/data/{late,reuse}-tier{1,2,3,4}.jsonl --policy full
if [ "${ORACLE:-0}" = 1 ]; then
    $py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --limit "$n" \
        --tasks tests/data/{late,reuse}-tier4.jsonl --policy oracle recent --retention 0.1 0.2 0.3
fi
$py tools/train/check_llamacpp.py "$out/kara-reasoner-1m.gguf" "$ckpt" \
    --tasks tests/data/late-tier4.jsonl | tee "$out/llamacpp-check.txt" || true
$py tools/train/check_llamacpp.py "$out/kara-reasoner-1m.gguf" "$ckpt" \
    --tasks tests/data/reuse-tier4.jsonl | tee -a "$out/llamacpp-check.txt" || true
