"""Traces, features and labels for the retention prior (retention_prior.py).

A trace is one token sequence the model reads from position 0: a prompt and
what the model wrote after it. Formats:

  FILE.jsonl   one object per line, any of
                 {"tokens": [ids...], "prompt_tokens": P}
                 {"prompt": "text", "completion": "text"}   (also "output" or "response")
                 {"text": "text", "prompt_tokens": P}
               texts are tokenized by the model's own tokenizer (`kara tokenize --special`);
               P (or the prompt's tokens) is left out of training: the runtime never evicts
               the prompt. Without P nothing is left out.
  FILE.txt     the whole file is one trace (text, no prompt)

For each trace the model is teacher-forced (gguf_forward.py). A token j's
label score is how strongly queries at least D positions later read it: for
every layer and query head the largest attention probability any query
i >= j + D gives j, the maximum over heads, the mean over layers. The last D
tokens of a trace have no such queries yet and are left out, as is the
prompt. Features are what the runtime's KV cache holds for the slot: the
value row of one layer (every KV head) and the norms of its key's RoPE pairs.
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch


TOKENIZE_BATCH = 64  # the most inputs one `kara tokenize` takes


def _tokenize(kara, model_path, texts, bos):
    """Token ids of each text by `kara tokenize --special --ids-only` (one process per 64 texts)."""
    if not texts:
        return []
    if not kara or not os.path.exists(kara):
        raise SystemExit(f"traces given as text need the kara binary to tokenize them (--kara, tried '{kara}')")
    out = []
    with tempfile.TemporaryDirectory() as d:
        for lo in range(0, len(texts), TOKENIZE_BATCH):
            cmd = [kara, "tokenize", "-m", model_path, "--special", "--ids-only"] + ([] if bos else ["--no-bos"])
            for i, t in enumerate(texts[lo:lo + TOKENIZE_BATCH], lo):
                p = os.path.join(d, f"{i}.txt")
                with open(p, "w", encoding="utf-8") as f:
                    f.write(t)
                cmd += ["-f", p]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"kara tokenize failed with exit {r.returncode}: {r.stderr.strip()}")
            out += r.stdout.splitlines()
    if len(out) != len(texts):
        raise SystemExit(f"kara tokenize gave {len(out)} lines for {len(texts)} texts")
    return [[int(x) for x in line.split()] for line in out]


def read_traces(paths, kara, model_path, max_traces=0):
    """[(ids, n_prompt)] from the trace files."""
    recs = []
    for path in paths:
        if path.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                recs += [json.loads(line) for line in f if line.strip()]
        else:
            with open(path, encoding="utf-8") as f:
                recs.append({"text": f.read(), "prompt_tokens": 0})
    if max_traces:
        recs = recs[:max_traces]
    # texts to tokenize: (record index, part, text, with BOS)
    todo = []
    for i, r in enumerate(recs):
        if "tokens" in r:
            continue
        comp = next((r[k] for k in ("completion", "output", "response") if k in r), None)
        if "prompt" in r and comp is not None:
            todo += [(i, "prompt", r["prompt"], True), (i, "completion", comp, False)]
        elif "text" in r:
            todo.append((i, "text", r["text"], True))
        else:
            raise SystemExit(f"trace {i}: needs 'tokens', 'text', or 'prompt' with 'completion'")
    ids = [None] * len(todo)
    for bos in (True, False):  # BOS (where the vocabulary adds one) only before the first part
        idx = [k for k, t in enumerate(todo) if t[3] == bos]
        for k, toks in zip(idx, _tokenize(kara, model_path, [todo[k][2] for k in idx], bos)):
            ids[k] = toks
    parts = {}
    for (i, part, _, _), toks in zip(todo, ids):
        parts.setdefault(i, {})[part] = toks
    out = []
    for i, r in enumerate(recs):
        if "tokens" in r:
            out.append(([int(x) for x in r["tokens"]], int(r.get("prompt_tokens", 0))))
        elif "text" in parts.get(i, {}):
            out.append((parts[i]["text"], int(r.get("prompt_tokens", 0))))
        else:
            p, c = parts[i]["prompt"], parts[i]["completion"]
            out.append((p + c, len(p)))
    return out


def label_scores(far):
    """Per token: the largest far probability over query heads (far[l]: (T, 2, H), index 1 = the
    largest single probability), the mean over layers."""
    return torch.stack([f[:, 1].max(1).values for f in far.values()]).mean(0)


class Collected:
    """Features of every candidate layer and label scores of the trainable tokens, per trace."""

    def __init__(self):
        self.feats = {}    # layer -> list of (n, n_feat) float32 arrays
        self.scores = []   # list of (n,) label scores
        self.trace = []    # list of (n,) trace index


def collect(model, traces, layers, distance, max_tokens=4096, per_trace=0, seed=0, log=print):
    """Teacher-force every trace and keep, for tokens P <= j < T - distance (at most per_trace of them,
    drawn at random, when per_trace > 0), the features of each layer in `layers` and the label score."""
    rng = np.random.default_rng(seed)
    c = Collected()
    for layer in layers:
        c.feats[layer] = []
    n_tok = 0
    for ti, (ids, n_prompt) in enumerate(traces):
        ids = ids[:max_tokens]
        lo, hi = max(n_prompt, 0), len(ids) - distance
        if hi <= lo:
            continue
        o = model.run(ids, feature_layers=layers, distance=distance)
        sel = np.arange(lo, hi)
        if per_trace and len(sel) > per_trace:
            sel = np.sort(rng.choice(sel, per_trace, replace=False))
        t_sel = torch.from_numpy(sel)
        for layer in layers:
            v, kp = o["feats"][layer]
            c.feats[layer].append(torch.cat([v, kp], 1)[t_sel].numpy())
        c.scores.append(label_scores(o["far"])[t_sel].numpy())
        c.trace.append(np.full(len(sel), ti))
        n_tok += len(sel)
        if (ti + 1) % 20 == 0 or ti + 1 == len(traces):
            log(f"  {ti + 1}/{len(traces)} traces teacher-forced, {n_tok} labelled tokens")
    if not c.scores:
        raise SystemExit(f"no trace is longer than its prompt plus the distance {distance}: nothing to label")
    return c


def auc(score, y):
    """Area under the ROC curve: the share of (positive, negative) pairs the
    score ranks right, ties counting half (Mann-Whitney, each tied score given
    the average of its ranks). Takes arrays or CPU tensors."""
    s, y = np.asarray(score, dtype=np.float64), np.asarray(y, bool)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, group, count = np.unique(s, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(count) - (count - 1) / 2  # 1-based ranks averaged over each run of ties
    return float((mean_rank[group][y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
