#!/usr/bin/env python3
"""Oracle bound of KV eviction at a share of full's peak memory (issue 47).

What could any eviction method reach at a share s of full KV's peak? This
tool answers with an eviction that knows the future: it first decodes each
problem greedily with full KV and records, for every position j, how
strongly later queries read it (the largest attention probability any query
at least --distance positions later gives j, over layers and heads: the
"read later" score the retention prior is trained on, with no task labels).
It then decodes the problem again under a cache of s x full's peak slots:
the prompt, the last --window positions, and the K generated positions
with the highest read-later score (K fills the rest), so a slot outside
that set is dropped once it leaves the window and never returns, as in any
evicting cache. A position-indexed score is exact while the second run
writes what the first did; where it diverges the oracle is an
approximation (reported as `diverged`).

Memory is counted in slots: with no reservation of its own the oracle's
bytes are its slots times the row bytes, so a share of slots is a share of
bytes. `--baseline recent` adds a cache of the same slots holding the prompt
and the most recent positions only.

  /usr/bin/python3 tools/train/oracle_bound.py --model tools/train/runs/plain1/best.pt \\
      --tasks tests/data/late-tier5.jsonl --limit 40 --shares 0.2,0.3 [--window 64] [--distance 32]
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402
import tasks  # noqa: E402


@torch.no_grad()
def decode(model, prompt_ids, max_new, keep_fn=None, distance=0):
    """Greedy decoding of one problem. keep_fn(pos) gives the visible mask
    of positions 0..pos (None: full KV). Returns the generated ids and, with
    distance > 0, every position's read-later score."""
    T = len(prompt_ids) + max_new + 1
    cache = model.new_cache(1, T)
    fut = torch.zeros(T)
    out = []
    for pos in range(T - 1):
        tok = torch.tensor(prompt_ids[pos]) if pos < len(prompt_ids) else torch.tensor(out[-1])
        vis = keep_fn(pos)[None] if keep_fn else None
        got = torch.zeros(1, pos + 1)
        logits = model.step(tok.view(1), pos, cache, vis, got)[0]
        got = got[0]
        if distance and pos >= distance:
            fut[:pos + 1 - distance] = torch.maximum(fut[:pos + 1 - distance], got[:pos + 1 - distance])
        if pos >= len(prompt_ids) - 1:
            out.append(int(logits.argmax()))
            if out[-1] == tasks.IM_END or len(out) >= max_new:
                break
    return out, fut


def answer_of(ids):
    text = tasks.decode_ids(ids)
    return text.split("</think>")[-1].replace("<|im_end|>", "").strip() if "</think>" in text else ""


def generation_cap(model, problem, P):
    """Tokens one greedy decode may write: twice the reference thinking, as
    kara eval caps it, and never past the model's context (its RoPE table
    ends there)."""
    return min(2 * problem["think_tokens"] + 64, model.c.context_length - P - 1)


def emit(row, path):
    """Print one result row as JSON and append it to path (if given)."""
    print(json.dumps(row), flush=True)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a checkpoint (ckpt.pt / best.pt) of train.py")
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shares", default="0.2,0.3", help="shares of full's peak slots (= bytes)")
    ap.add_argument("--window", type=int, default=64, help="recent positions always kept")
    ap.add_argument("--distance", type=int, default=32, help="a read counts when the query is this far later")
    ap.add_argument("--baseline", choices=["none", "recent"], default="recent")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="", help="append one JSON line per (share, policy)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    probs = evaluate.read_jsonl(a.tasks)[:a.limit or None]
    shares = [float(x) for x in a.shares.split(",")]
    rows = {(s, pol): {"correct": 0, "n": 0, "refused": 0, "diverged": 0} for s in shares
            for pol in (["oracle"] + (["recent"] if a.baseline == "recent" else []))}
    full_ok = 0
    t0 = time.time()
    for p in probs:
        pids = tasks.generation_prompt_ids(p["prompt"])
        P = len(pids)
        max_new = generation_cap(model, p, P)
        ref, fut = decode(model, pids, max_new, None, a.distance)
        full_ok += answer_of(ref) == p["answer"]
        peak = P + len(ref) - 1  # full's most slots held (its last token is never cached)
        for s in shares:
            budget = int(math.floor(s * peak))
            for pol in [k[1] for k in rows if k[0] == s]:
                r = rows[(s, pol)]
                r["n"] += 1
                w = a.window if pol == "oracle" else budget - P
                k = budget - P - w if pol == "oracle" else 0
                if w < 1 or k < 0:
                    r["refused"] += 1  # the share cannot hold the prompt and the window
                    continue
                keep = torch.zeros(P + max_new + 1, dtype=torch.bool)
                keep[:P] = True
                if k > 0:
                    gen = fut[P:peak].clone()
                    top = torch.topk(gen, min(k, gen.numel())).indices + P
                    keep[top] = True

                def keep_fn(pos, keep=keep, w=w):
                    j = torch.arange(pos + 1)
                    return keep[:pos + 1] | (pos - j < w)
                out, _ = decode(model, pids, max_new, keep_fn)
                r["correct"] += answer_of(out) == p["answer"]
                r["diverged"] += out != ref
    n = len(probs)
    print(f"{os.path.basename(a.tasks)}: {n} problems, full KV {full_ok}/{n} ({time.time() - t0:.0f}s)", flush=True)
    for (s, pol), r in sorted(rows.items()):
        row = {"tasks": os.path.basename(a.tasks), "share": s, "policy": pol, "window": a.window if pol == "oracle"
               else None, "distance": a.distance, "n": r["n"], "correct": r["correct"],
               "accuracy": round(r["correct"] / max(r["n"], 1), 4), "refused": r["refused"], "diverged": r["diverged"],
               "full_correct": full_ok}
        emit(row, a.json)


if __name__ == "__main__":
    main()
