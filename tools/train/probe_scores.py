#!/usr/bin/env python3
"""What Kara's window scorer sees on the reasoning task.

Runs reference transcripts with full KV, then scores each Kara window the
way docs/KARA_METHOD.md section 5 does (bidirectional, no causal mask, diagonal
excluded, softmax over the window, mean over query heads, KV heads and
layers) and takes the Top-K of the compressible region (K = retention x
interval). Reports which characters the Top-K holds and how many of the
product result lines ("pK=...", the spans the final sum re-reads) survive,
against the share a random pick of the same size would keep.

The queries are those of the full-KV run, so this is the best case for the
scorer: in the runtime, later windows are scored with queries computed over
an already compressed cache.

With --prior GGUF (a model file written by retention_prior.py) the window's
scores also get the retention prior, as the runtime adds it
(docs/KARA_METHOD.md section 14): s / max_C s + w * prior, for each weight
given with --prior-weight.

  /usr/bin/python3 tools/train/probe_scores.py --model tools/train/checkpoints/main3/ckpt.pt \
      --tasks tests/data/late-tier4.jsonl --limit 20 \
      [--prior tools/train/model/kara-reasoner-1m-prior.gguf --prior-weight 0 1 4]
"""
import argparse
import collections
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402
import gguf_io  # noqa: E402
import tasks  # noqa: E402
from model import attend  # noqa: E402


@torch.no_grad()
def queries_and_keys(m, ids):
    """Post-norm, post-RoPE q (H, T, d), k (KVH, T, d) and v (KVH, T, d) of every layer."""
    B, T = ids.shape
    cos, sin = m.cos[:T], m.sin[:T]
    x = m.tok(ids)
    out = []
    for b in m.blocks:
        q, k, v = b.qkv(x, cos, sin)
        out.append((q[0], k[0], v[0]))
        o = attend(q, k, v, None, 256)
        x = b.ffn(x + b.wo(o.transpose(1, 2).reshape(B, T, -1)))
    return out


def window_scores(qk, w0, w1, group, head_dim, query_reduce="sum", head_reduce="mean"):
    """s(j) for j in [w0, w1): bidirectional, self excluded; over the window's
    queries (sum as the spec, or max), then over the heads (mean as the spec,
    or max), then mean over layers."""
    s = torch.zeros(w1 - w0)
    for q, k, _ in qk:
        z = q[:, w0:w1] @ k[:, w0:w1].repeat_interleave(group, 0).transpose(-1, -2) / math.sqrt(head_dim)
        z.diagonal(dim1=-2, dim2=-1).fill_(float("-inf"))
        pr = torch.softmax(z, -1)
        per_head = pr.sum(1) if query_reduce == "sum" else pr.max(1).values
        s += per_head.mean(0) if head_reduce == "mean" else per_head.max(0).values
    return s / len(qk)


def load_prior(path):
    """The retention prior of a GGUF: (layer, key_pairs, w1, b1, w2, b2) as tensors."""
    r = gguf_io.Reader(path)
    t = {n: torch.from_numpy(r.tensor("kara_prior." + n)) for n in ("w1", "b1", "w2", "b2")}
    return r.meta["kara.prior.layer"], r.meta["kara.prior.features"] == "v+kpair", t


def prior_values(prior, qkv):
    """The prior of every position, from what an f16 KV cache holds: the value rows of the prior's layer and
    the norms of its keys' RoPE pairs (a rotation keeps them, so the rotated keys give the same norms)."""
    layer, key_pairs, t = prior
    _, k, v = qkv[layer]
    T, d = v.shape[1], v.shape[2]
    x = v.half().float().transpose(0, 1).reshape(T, -1)
    if key_pairs:
        kh = k.half().float()
        pairs = torch.sqrt(kh[..., :d // 2] ** 2 + kh[..., d // 2:] ** 2)  # NeoX pairs (i, i + d/2)
        x = torch.cat([x, pairs.transpose(0, 1).reshape(T, -1)], 1)
    h = torch.relu(x @ t["w1"].T + t["b1"])
    return torch.sigmoid(h @ t["w2"] + t["b2"][0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--interval", type=int, default=128)
    ap.add_argument("--buffer", type=int, default=32)
    ap.add_argument("--retention", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--query-reduce", choices=["sum", "max"], default="sum", help="over the window's queries")
    ap.add_argument("--head-reduce", choices=["mean", "max"], default="mean", help="over the query heads")
    ap.add_argument("--prior", help="a GGUF with a retention prior (retention_prior.py)")
    ap.add_argument("--prior-weight", type=float, nargs="+", default=[1.0])
    a = ap.parse_args()
    if a.prior:
        prior = load_prior(a.prior)
        for w in a.prior_weight:
            probe(a, prior, w)
    else:
        probe(a, None, 0.0)


def probe(a, prior, weight):
    torch.set_num_threads(a.threads)
    m = evaluate.load_model(a.model)
    group = m.c.n_heads // m.c.n_kv_heads
    kept_chars, all_chars = collections.Counter(), collections.Counter()
    info_total = info_kept = windows = digit_total = digit_kept = 0
    for p in evaluate.read_jsonl(a.tasks)[:a.limit]:
        ex = tasks.example_for_prompt(p["prompt"])
        ids = ex["ids"]
        qk = queries_and_keys(m, torch.tensor([ids]))
        pv = prior_values(prior, qk) if prior else None
        f = len(tasks.generation_prompt_ids(p["prompt"]))
        think_end = ids.index(tasks.END_THINK)
        while f + a.interval + a.buffer <= think_end:
            s = window_scores(qk, f, f + a.interval + a.buffer, group, m.c.head_dim, a.query_reduce,
                              a.head_reduce)[:a.interval]
            if prior:
                mx = float(s.max())
                s = (s / mx if mx > 0 else torch.zeros_like(s)) + weight * pv[f:f + a.interval]
            k = max(1, round(a.retention * a.interval))
            top = set((torch.topk(s, k).indices + f).tolist())
            for j in range(f, f + a.interval):
                ch = "digit" if 48 <= ids[j] <= 57 else repr(chr(ids[j])) if ids[j] < 256 else "special"
                all_chars[ch] += 1
                kept_chars[ch] += j in top
                if ex["kind"][j] == tasks.KIND_INFO:
                    info_total += 1
                    info_kept += j in top
                    if ch == "digit":
                        digit_total += 1
                        digit_kept += j in top
            windows += 1
            f += a.interval  # the next window's fresh slots follow this one's compressible region
    n_all = sum(all_chars.values())
    if prior:
        print(f"retention prior of {a.prior}, weight {weight:g}:")
    print(f"{windows} windows of {a.interval} compressible slots, Top-K = {a.retention:.2f} of each")
    print(f"product result line tokens kept: {info_kept} of {info_total} = {info_kept / max(info_total, 1):.1%} "
          f"(a random pick keeps {a.retention:.0%}); their digits: {digit_kept} of {digit_total} = "
          f"{digit_kept / max(digit_total, 1):.1%}")
    print("share kept by character class (class: kept / present):")
    for ch, n in sorted(all_chars.items(), key=lambda kv: -kept_chars[kv[0]]):
        print(f"  {ch:8s} {kept_chars[ch]:6d} / {n:6d} = {kept_chars[ch] / n:6.1%}   "
              f"({n / n_all:5.1%} of the window)")


if __name__ == "__main__":
    main()
