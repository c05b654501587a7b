#!/usr/bin/env bash
# Export a checkpoint, evaluate it and collect the shipped files.
#   tools/train/finish.sh CKPT RUN_DIR...   (RUN_DIRs: the stages, in order, for the loss curve)
#   (a RUN_DIR may be preceded by the loss.csv of earlier stages whose run folders are gone)
# Writes tools/train/model/: kara-reasoner-1m.gguf (the model plus its retention
# prior, trained on 200 reference traces of both families: prior.txt has its
# held-out AUC), config-STAGE.json (each stage, with its history), loss.csv +
# loss.svg (all stages), eval.jsonl
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plain="$tmp/kara-reasoner-1m-plain.gguf" # what llama.cpp loads: it refuses tensors it does not name
$py tools/train/export_gguf.py "$ckpt" "$plain"
$py tools/train/reasoner_traces.py --count 200 --families late,reuse --out "$tmp/traces.jsonl"
$py tools/train/retention_prior.py --model "$plain" --traces "$tmp/traces.jsonl" --out "$out/kara-reasoner-1m.gguf" \
    --threads 1 --epochs 10 --per-trace 512 | tee "$out/prior.txt"
for r in "$@"; do
    case "$r" in *.csv) cp "$r" "$tmp/earlier-loss.csv" ;; *) cp "$r/config.json" "$out/config-$(basename "$r").json" ;; esac
done
runs=()
for r in "$@"; do case "$r" in *.csv) runs+=("$tmp/earlier-loss.csv") ;; *) runs+=("$r") ;; esac; done
$py tools/train/plot_loss.py "$out/loss.csv" "$out/loss.svg" "${runs[@]}"
rm -f "$out/eval.jsonl"
$py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --teacher-forced --limit "$n" \
    --tasks tests/data/{late,reuse}-tier4.jsonl --policy full oracle recent --retention 0.1 0.2 0.3
$py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --limit "$n" \
    --tasks tests/data/{late,reuse}-tier{1,2,3,4}.jsonl --policy full
if [ "${ORACLE:-0}" = 1 ]; then
    $py tools/train/evaluate.py --model "$ckpt" --json "$out/eval.jsonl" --limit "$n" \
        --tasks tests/data/{late,reuse}-tier4.jsonl --policy oracle recent --retention 0.1 0.2 0.3
fi
# the first run of llamacpp-ref installs the llama.cpp library the check loads
../shared/bench/llamacpp-ref ../shared/models/stories260K.gguf -t 1 -p 16 -n 8 >/dev/null 2>&1 || true
$py tools/train/check_llamacpp.py "$plain" "$ckpt" \
    --tasks tests/data/late-tier4.jsonl | tee "$out/llamacpp-check.txt" || true
$py tools/train/check_llamacpp.py "$plain" "$ckpt" \
    --tasks tests/data/reuse-tier4.jsonl | tee -a "$out/llamacpp-check.txt" || true
