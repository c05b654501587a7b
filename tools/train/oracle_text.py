#!/usr/bin/env python3
"""Oracle bound of KV eviction on natural text (issue 47).

Could any selection of older slots beat a sliding window on a model's own
text, at the same number of slots? The eviction here knows the future: a
full-KV pass scores every position j by the largest attention probability
any query at least W positions later gives it, or the mass those queries
give it (`--score sum`), over layers and heads; W is the recent window. The text is then replayed teacher-forced with, for each
query i, only these keys visible:

  oracle     the prompt, the newest W positions, and the best-scored rest
             of [prompt end, i - W] up to S slots in all;
  streaming  the first --sinks positions and the newest S - sinks (the
             runtime's `streaming` method);

S = share x the text's length (full KV's peak slots). With a fixed score
and a pool that only grows, a slot the oracle drops never comes back, as in
any evicting cache, and a teacher-forced replay with per-query masks
computes exactly what such a cache computes. Slots are bytes here: neither
reserves anything beside its slots. Printed: KL(full || method), mean over
the queries after the prompt (the steps `kara eval-kv` replays), and top-1
agreement, as one JSON line per text, share and window.

  /usr/bin/python3 tools/train/oracle_text.py --model ../shared/models/stories260K.gguf \\
      --text docs/kv_eval/stories260K-s900001.txt --shares 0.3,0.48 --windows 32,64,128
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_forward  # noqa: E402
import prior_data  # noqa: E402


def read_later(model, ids, distance, kind):
    """Full-KV logits and, per position, how much the queries at least
    `distance` later read it: their largest attention probability (max) or
    the attention mass they give it (sum), the max over layers and heads."""
    out = model.run(ids, distance=distance)
    col = 1 if kind == "max" else 0
    score = torch.stack([f[:, col].max(-1).values for f in out["far"].values()]).max(0).values
    return out["logits"], score


def streaming_mask(T, slots, sinks):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j <= i) & ((j < sinks) | (j > i - (slots - sinks)))


def oracle_mask(T, slots, prompt, window, score):
    """Row i: the prompt, the newest `window` positions and the best-scored
    rest of [prompt, i - window], `slots` in all."""
    vis = torch.zeros(T, T, dtype=torch.bool)
    extra = max(0, slots - prompt - window)
    for i in range(T):
        vis[i, :min(prompt, i + 1)] = True
        lo = max(prompt, i - window + 1)
        vis[i, lo:i + 1] = True
        if lo > prompt and extra > 0:
            pool = score[prompt:lo]
            k = min(extra, pool.numel())
            vis[i, prompt + torch.topk(pool, k).indices] = True
    return vis


def kl_top1(full, got, start):
    lp, lq = torch.log_softmax(full[start:].double(), -1), torch.log_softmax(got[start:].double(), -1)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    return float(kl.mean()), float((full[start:].argmax(-1) == got[start:].argmax(-1)).float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="GGUF model")
    ap.add_argument("--text", nargs="+", required=True, help="text files (tokenized with BOS)")
    ap.add_argument("--kara", default=os.path.join(os.path.dirname(__file__), "../../build/bin/kara"),
                    help="the kara binary, to tokenize the texts")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens (kept whole; eval-kv's default)")
    ap.add_argument("--sinks", type=int, default=4, help="streaming's sink slots")
    ap.add_argument("--shares", default="0.3,0.48", help="slots as shares of the text's length")
    ap.add_argument("--windows", default="32,64,128", help="the oracle's recent windows")
    ap.add_argument("--score", choices=("max", "sum"), default="max", help="how later reads are scored")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = gguf_forward.GGUFModel(a.model)
    texts = [open(p, encoding="utf-8").read() for p in a.text]
    for path, ids in zip(a.text, prior_data._tokenize(a.kara, a.model, texts, bos=True)):
        T = len(ids)
        windows = [int(w) for w in a.windows.split(",")]
        scored = {w: read_later(model, ids, w, a.score) for w in windows}
        full = scored[windows[0]][0]
        for share in (float(s) for s in a.shares.split(",")):
            slots = int(round(share * T))
            row = {"text": os.path.basename(path), "tokens": T, "share": share, "slots": slots}
            got = model.run(ids, visible=streaming_mask(T, slots, a.sinks))["logits"]
            kl, top1 = kl_top1(full, got, a.prompt)
            print(json.dumps(dict(row, method="streaming", kl=round(kl, 6), top1=round(top1, 4))), flush=True)
            for w in windows:
                if a.prompt + w > slots:
                    continue
                vis = oracle_mask(T, slots, a.prompt, w, scored[w][1])
                kl, top1 = kl_top1(full, model.run(ids, visible=vis)["logits"], a.prompt)
                print(json.dumps(dict(row, method=f"oracle-{a.score}-w{w}", kl=round(kl, 6), top1=round(top1, 4))),
                      flush=True)


if __name__ == "__main__":
    main()
