#!/usr/bin/env bash
# Export the plain model (issue 46), train its retention prior, evaluate it and
# collect the shipped files.
#   tools/train/finish_plain.sh CKPT RUN_DIR
# Writes to tools/train/model/ (OUT=DIR to write elsewhere):
#   kara-reasoner-plain.gguf  the model plus its retention prior. The prior comes from the general
#                             tool: 200 transcripts of training-stream problems (no held-out set's
#                             problem among them), each token labelled by the model's own attention,
#                             no task labels. Kara turns it on by default (kara.score.prior_weight:
#                             auto); training-free rows set the weight to 0.
#   plain-prior.txt           the prior's held-out AUC
#   plain-config.json         RUN_DIR's config.json: every resume's arguments and the data seeds
#   plain-loss.csv, plain-loss.svg  the loss curve and the in-training evaluations
#   plain-eval.csv            greedy full KV (`kara eval`) on the shipped held-out sets of every
#                             family and tier (tests/data, seed 1234), EVAL_N problems a set (100)
#   plain-llamacpp-check.txt  llama.cpp against PyTorch on the export without the prior
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=$1
run=$2
out=${OUT:-tools/train/model}
py="nice -n 15 /usr/bin/python3"
n=${EVAL_N:-100}
kara=${KARA:-build/bin/kara}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
noprior="$tmp/kara-reasoner-plain-noprior.gguf" # what llama.cpp loads: it refuses tensors it does not name
$py tools/train/export_gguf.py "$ckpt" "$noprior" --name kara-reasoner-plain
$py tools/train/reasoner_traces.py --count 200 --seed 5151 --families late,reuse,chase \
    --exclude-seeds 777 9001 777001 4601 4602 4603 4604 --out "$tmp/traces.jsonl"
$py tools/train/retention_prior.py --model "$noprior" --traces "$tmp/traces.jsonl" \
    --out "$out/kara-reasoner-plain.gguf" --threads 1 | grep -v "traces teacher-forced" | tee "$out/plain-prior.txt"
cp "$run/config.json" "$out/plain-config.json"
$py tools/train/plot_loss.py --title "kara-reasoner-plain training loss" "$out/plain-loss.csv" "$out/plain-loss.svg" "$run"
first=1
for fam in late reuse chase; do
    for tier in 1 2 3 4 5; do
        nice -n 15 "$kara" eval -m "$out/kara-reasoner-plain.gguf" -t 2 --tasks "tests/data/$fam-tier$tier.jsonl" \
            --limit "$n" --methods full --budgets none --out "$tmp/e.csv" >"$tmp/e.txt" 2>&1 ||
            { cat "$tmp/e.txt" >&2; exit 1; }
        if [ "$first" = 1 ]; then echo "family,tier,$(head -1 "$tmp/e.csv")" >"$out/plain-eval.csv"; first=0; fi
        tail -n +2 "$tmp/e.csv" | sed "s/^/$fam,$tier,/" >>"$out/plain-eval.csv"
        grep "^full " "$tmp/e.txt" | sed "s/^/$fam tier $tier: /" || true
    done
done
# the first run of llamacpp-ref installs the llama.cpp library the check loads
../shared/bench/llamacpp-ref ../shared/models/stories260K.gguf -t 1 -p 16 -n 8 >/dev/null 2>&1 || true
$py tools/train/check_llamacpp.py "$noprior" "$ckpt" --tasks tests/data/chase-tier4.jsonl |
    tee "$out/plain-llamacpp-check.txt" || true
