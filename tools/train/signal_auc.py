#!/usr/bin/env python3
"""Can a training-free score see which slots will be read later? (issue 47)

An evicting cache decides about a generated position j when j leaves the
protected recent window, at step t = j + W. What it should keep are the
positions that later queries read (the oracle's "read later" score: the
largest attention probability any layer and head of any query after t gives
j). This tool asks how well each score a training-free method can compute at
step t ranks those positions:

  h2o        attention j received so far, summed over queries, layers, heads
  window     attention from the queries of j's own window, (j, j + W] (what a
             window scorer sees: Kara scores a window by its own tokens)
  obs        attention from the last --obs queries before t (snapkv's window)
  online_max the largest attention j received so far from a query at least
             --distance later (kara.score.mode: online_max)
  vnorm      the norm of j's value rows, mean over layers (a content score)
  recency    j itself (newer is better: what a sliding window assumes)

For each problem it decodes greedily with full KV, then replays the
transcript teacher-forced to get every layer's attention. A position is a
positive when its read-later score is in the top --positive-frac of the
generated positions. Reported per signal: AUC (0.5 is chance) and the
recall of the positives within the signal's top 10%, 20% and 40% of the
generated positions (--keep: what a cache holding that share of the
generated slots beside its window would keep by that signal).

  /usr/bin/python3 tools/train/signal_auc.py --model CKPT --tasks S.jsonl [--limit 10] [--window 64]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402
import oracle_bound  # noqa: E402
import tasks  # noqa: E402
from prior_data import auc  # noqa: E402


def signals(a_sum, a_max, vnorm, P, W, obs, distance):
    """Each signal's value for every position j in [P, T - W), as known at
    step j + W, and the read-later label score (reads after j + W)."""
    T = a_sum.shape[0]
    js = torch.arange(P, T - W)
    t_idx = torch.arange(T)[:, None]
    j_idx = torch.arange(T)[None, :]
    cum = a_sum.cumsum(0)  # cum[t, j]: reads of j by queries <= t
    later = (t_idx >= j_idx + distance)
    ma = torch.where(later, a_max, torch.zeros(()))
    cummax = torch.cummax(ma, 0).values
    after = (t_idx > j_idx + W)
    label = torch.where(after, a_max, torch.zeros(())).max(0).values
    t = js + W
    h2o = cum[t, js]
    sig = {"h2o": h2o, "window": h2o - cum[js, js], "obs": h2o - cum[torch.maximum(t - obs, js), js],
           "online_max": cummax[t, js], "vnorm": vnorm[js], "recency": js.float()}
    return sig, label[js]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a checkpoint (ckpt.pt / best.pt) of train.py")
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--window", type=int, default=64, help="W: the recent window a position leaves at j + W")
    ap.add_argument("--obs", type=int, default=32, help="snapkv's observation window")
    ap.add_argument("--distance", type=int, default=32, help="online_max counts queries this far later")
    ap.add_argument("--positive-frac", type=float, default=0.1)
    ap.add_argument("--keep", default="0.1,0.2,0.4", help="recall of the positives within each signal's top "
                    "share of the generated positions (the slots a cache could keep)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="", help="append one JSON line with the results")
    a = ap.parse_args()
    a.keep = [float(x) for x in a.keep.split(",")]
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    probs = evaluate.read_jsonl(a.tasks)[:a.limit or None]
    names = ["h2o", "window", "obs", "online_max", "vnorm", "recency"]
    aucs = {k: [] for k in names}
    recall = {k: {f: [] for f in a.keep} for k in names}
    full_ok = 0
    for p in probs:
        pids = tasks.generation_prompt_ids(p["prompt"])
        P = len(pids)
        ref, _ = oracle_bound.decode(model, pids, oracle_bound.generation_cap(model, p, P))
        full_ok += oracle_bound.answer_of(ref) == p["answer"]
        ids = pids + ref
        a_sum, a_max, vnorm = oracle_bound.attention_maps(model, ids)
        sig, score = signals(a_sum, a_max, vnorm, P, a.window, a.obs, a.distance)
        k = max(1, int(a.positive_frac * len(score)))
        label = torch.zeros(len(score), dtype=torch.bool)
        label[torch.topk(score, k).indices] = True
        for name in names:
            aucs[name].append(auc(sig[name], label))
            for f in a.keep:
                top = torch.topk(sig[name], max(1, int(f * len(score)))).indices
                recall[name][f].append(label[top].sum().item() / k)
    row = {"tasks": os.path.basename(a.tasks), "n": len(probs), "full_correct": full_ok, "window": a.window,
           "positive_frac": a.positive_frac,
           "auc": {k: round(sum(v) / len(v), 3) for k, v in aucs.items()},
           "recall": {f"top{round(100 * f)}%": {k: round(sum(v[f]) / len(v[f]), 3) for k, v in recall.items()}
                      for f in a.keep}}
    oracle_bound.emit(row, a.json)


if __name__ == "__main__":
    main()
