#!/usr/bin/env bash
# The retention prior trained from a model's own text (issue 46 item 6):
# tools/train/retention_prior.py --self-generate runs `kara run` with one
# sampling seed per text, writes the traces it trained on (no task labels:
# the records hold only text, prompt and seed), and a 1-epoch fit writes a
# GGUF that `kara` loads with the prior on. The same seeds give the same
# traces again (self_traces.py alone); a model without BOS needs a prompt and
# says so; prior_eval.py never gives a baseline more peak bytes than Kara's.
# Tiny synthetic llama and qwen3 models, a few seconds. Needs PyTorch and
# NumPy in KARA_TORCH_PYTHON (default /usr/bin/python3); skipped without them.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
torch_python "the prior tool's fit needs them"

for arch in llama qwen3; do
    "$KARA" gen-model --arch $arch -o "$tmp/$arch.gguf" >/dev/null 2>&1
    check "gen-model $arch" '[ -s "$tmp/$arch.gguf" ]'
done

# 1. no BOS and no prompt: a clear error, nothing written
"$PY" "$T/retention_prior.py" --model "$tmp/llama.gguf" --self-generate 2 --kara "$KARA" \
    --out "$tmp/none.gguf" >"$tmp/nobos.out" 2>&1
rc=$?
check "no BOS, no --gen-prompt: exit non-zero (rc $rc)" '[ $rc -ne 0 ]'
check "no BOS, no --gen-prompt: names the cause" \
    'grep -q "kara run (seed 100000) failed with exit 64: .*adds no BOS token; give a prompt" "$tmp/nobos.out"'
check "no BOS, no --gen-prompt: no output file" '[ ! -e "$tmp/none.gguf" ]'

# 2. self-generation and a 1-epoch fit on each architecture
for arch in llama qwen3; do
    "$PY" "$T/retention_prior.py" --model "$tmp/$arch.gguf" --self-generate 6 --gen-seed 700 --gen-tokens 200 \
        --gen-ignore-eos --gen-prompt "Once" --gen-prompt "The day" --distance 32 --layer 1 --epochs 1 --per-trace 0 \
        --holdout 0.34 --threads 1 --kara "$KARA" --save-traces "$tmp/$arch.jsonl" \
        --out "$tmp/$arch-prior.gguf" >"$tmp/$arch.out" 2>&1
    rc=$?
    check "$arch: retention_prior.py --self-generate exits 0 (rc $rc)" '[ $rc -eq 0 ]' || cat "$tmp/$arch.out"
    check "$arch: 6 texts from seeds 700..705" 'grep -q "seeds 700\.\.705" "$tmp/$arch.out" && \
        [ "$(wc -l <"$tmp/$arch.jsonl")" -eq 6 ]'
    check "$arch: each record is prompt, completion and seed only, the prompts cycled" \
        '"$PY" -c "
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert all(sorted(r) == [\"completion\", \"prompt\", \"seed\"] for r in recs)
assert [r[\"seed\"] for r in recs] == list(range(700, 706))
assert [r[\"prompt\"] for r in recs] == [\"Once\", \"The day\"] * 3
assert len({r[\"completion\"] for r in recs}) == 6 and all(len(r[\"completion\"]) > 20 for r in recs)
" "$tmp/$arch.jsonl"'
    check "$arch: the fit reports a held-out AUC and writes the GGUF" \
        'grep -q "held-out AUC" "$tmp/$arch.out" && grep -q "^wrote $tmp/$arch-prior.gguf" "$tmp/$arch.out"'
    check "$arch: the GGUF carries the prior at layer 1, distance 32" \
        '"$KARA" inspect "$tmp/$arch-prior.gguf" >"$tmp/$arch.inspect" && \
         grep -Eq "kara\.prior\.layer +uint32 +1$" "$tmp/$arch.inspect" && \
         grep -Eq "kara\.prior\.distance +uint32 +32$" "$tmp/$arch.inspect" && \
         grep -Eq "kara_prior\.w1 +F32 +\[96, 32\]" "$tmp/$arch.inspect"'
    expect_stderr "$arch: without the prior, prior weight 16 is refused" 78 "the model has no retention prior" \
        "$KARA" run -m "$tmp/$arch.gguf" --kv-prior-weight 16 -p "Once" -n 4 -s 1
    "$KARA" run -m "$tmp/$arch-prior.gguf" --kv-prior-weight 16 -p "Once" -n 4 -s 1 >/dev/null 2>"$tmp/run.err"
    rc=$?
    check "$arch: kara runs the model with the prior at weight 16 (rc $rc)" '[ $rc -eq 0 ]' || cat "$tmp/run.err"
done

# 3. the same seeds give the same traces (self_traces.py on its own)
"$PY" "$T/self_traces.py" --model "$tmp/qwen3.gguf" --n 6 --seed 700 --tokens 200 --ignore-eos \
    --prompt "Once" --prompt "The day" --kara "$KARA" --out "$tmp/again.jsonl" 2>"$tmp/again.err"
check "self_traces.py: same seeds, same traces" 'cmp -s "$tmp/again.jsonl" "$tmp/qwen3.jsonl"'

# 4. prior_eval.py: Kara at prior weights 0 and 16 (the same peak: the prior
#    adds no memory), every baseline matched under Kara's peak bytes
printf 'Once upon a time, a small dog ran to the park. %.0s' $(seq 1 12) >"$tmp/text.txt"
python3 "$T/prior_eval.py" --model "$tmp/llama-prior.gguf" --kara "$KARA" --text "$tmp/text.txt" \
    --config "$SRC/configs/eval-kv-stories260k.yaml" --retention 0.3 --weights 0,16 --max-budget 320 \
    --out "$tmp/pe.csv" >"$tmp/pe.out" 2>&1
rc=$?
check "prior_eval.py exits 0 (rc $rc)" '[ $rc -eq 0 ]' || cat "$tmp/pe.out"
check "prior_eval.py: rows for both weights and both baselines, none over the cap" \
    '"$PY" -c "
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r[\"method\"] for r in rows] == [\"kara prior 0\", \"kara prior 16\", \"streaming\", \"snapkv\"], rows
cap = int(rows[0][\"peak_kv_bytes\"])
assert int(rows[1][\"peak_kv_bytes\"]) == cap
assert all(0 < int(r[\"peak_kv_bytes\"]) <= cap and int(r[\"budget_tokens\"]) >= 32 for r in rows[2:])
" "$tmp/pe.csv"'
finish
