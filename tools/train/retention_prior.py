#!/usr/bin/env python3
"""Train Kara's retention prior for a model and write a copy of its GGUF with it.

The prior is a small head, in the spirit of Locret's retaining heads, that
predicts from what the KV cache holds for a token (the value row of one
layer and the norms of its key's RoPE pairs, neither of which depends on the
token's position) whether queries far later will read it. Kara adds it to
each window's attention scores (docs/KARA_METHOD.md, "The retention prior"),
so a token nothing in its own window attends to, but a step hundreds of
tokens later will, is still kept.

  /usr/bin/python3 tools/train/retention_prior.py --model IN.gguf --traces T.jsonl --out OUT.gguf
      [--layer auto|L] [--distance 160] [--features v+kpair|v] [--hidden 32] [--epochs 30] ...
  /usr/bin/python3 tools/train/retention_prior.py --model IN.gguf --self-generate N --out OUT.gguf
      [--gen-seed S] [--gen-tokens 480] [--gen-temp 0.8] [--gen-prompt TEXT ...] [--gen-ignore-eos]
      [--save-traces T.jsonl]

With --self-generate the traces are the model's own sampled text (self_traces.py:
`kara run` N times, seeds S..S+N-1, from BOS or from the --gen-prompt openings),
so a prior can be trained for any model the runtime loads, with no task labels.

Steps: teacher-force every trace with the model's own weights (gguf_forward.py:
llama, qwen2, qwen3; F32/F16/BF16 and Q4_0..Q8_0, Q4_K, Q5_K, Q6_K), label each
generated token by the attention later queries give it (prior_data.py), mark
the top --positive-frac of those scores as "read later", fit a one-hidden-layer
MLP with logistic loss on 80% of the traces, report held-out AUC, precision and
recall at the kept fraction, then write IN's metadata and tensors unchanged
plus:

  kara_prior.w1  F32 [n_in, hidden]   hidden-layer weights (input standardisation folded in)
  kara_prior.b1  F32 [hidden]
  kara_prior.w2  F32 [hidden]
  kara_prior.b2  F32 [1]
  kara.prior.layer (u32), kara.prior.features (string: "v" or "v+kpair"), and for the record
  kara.prior.distance (u32), kara.prior.positive_frac, kara.prior.auc (f32)

prior(j) = sigmoid(w2 . relu(W1 x_j + b1) + b2), x_j = [v_j, |k_j pairs|].
llama.cpp refuses a GGUF with tensors its architecture does not name, so keep
IN for llama.cpp; Kara loads both.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_dequant as dq  # noqa: E402
import gguf_io as g  # noqa: E402
import prior_data  # noqa: E402
from prior_data import auc  # noqa: E402
import self_traces  # noqa: E402
from gguf_forward import GGUFModel  # noqa: E402

PREFIX_TENSOR, PREFIX_KEY = "kara_prior.", "kara.prior."
FEATURES = ("v", "v+kpair")


def at_fraction(score, y, frac):
    """Precision and recall of the top `frac` of tokens by score."""
    k = max(1, int(round(frac * len(score))))
    top = np.argsort(-np.asarray(score), kind="mergesort")[:k]
    hit = np.asarray(y, bool)[top].sum()
    return hit / k, hit / max(1, int(np.asarray(y, bool).sum()))


def n_inputs(model, features):
    n = model.n_head_kv * model.head_dim
    return n + (model.n_head_kv * (model.rope_dim // 2) if features == "v+kpair" else 0)


def fit(x_tr, y_tr, hidden, epochs, lr, seed, pos_weight=1.0):
    """A one-hidden-layer MLP on standardised inputs, logistic loss. Returns (mean, std, net)."""
    torch.manual_seed(seed)
    x = torch.from_numpy(x_tr)
    mu, sd = x.mean(0), x.std(0) + 1e-4
    x = (x - mu) / sd
    y = torch.from_numpy(y_tr.astype(np.float32))
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    opt = torch.optim.Adam(net.parameters(), lr, weight_decay=1e-4)
    pw = torch.tensor(pos_weight)
    for ep in range(epochs):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 512):
            b = perm[i:i + 512]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x[b])[:, 0], y[b], pos_weight=pw)
            opt.zero_grad()
            loss.backward()
            opt.step()
        for group in opt.param_groups:  # a cosine decay over the epochs
            group["lr"] = lr * 0.5 * (1 + np.cos(np.pi * (ep + 1) / epochs))
    return mu, sd, net


def predict(head, x):
    mu, sd, net = head
    with torch.no_grad():
        return torch.sigmoid(net((torch.from_numpy(x) - mu) / sd)[:, 0]).numpy()


def folded(head):
    """W1, b1, w2, b2 with the standardisation folded into the first layer:
    W1 ((x - mu) / sd) + b1 = (W1 / sd) x + (b1 - (W1 / sd) mu)."""
    mu, sd, net = head
    w1 = net[0].weight.detach() / sd[None, :]
    b1 = net[0].bias.detach() - w1 @ mu
    return (w1.numpy().astype(np.float32), b1.numpy().astype(np.float32),
            net[2].weight.detach()[0].numpy().astype(np.float32), net[2].bias.detach().numpy().astype(np.float32))


def forward_folded(w1, b1, w2, b2, x):
    """What the runtime computes (runtime/kv/kv_prior.c), in float64 for the check."""
    h = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) + b1, 0.0)
    return 1.0 / (1.0 + np.exp(-(h @ w2.astype(np.float64) + b2[0])))


def write_gguf(src, dst, layer, features, weights, extra):
    """Copy src to dst, replacing any earlier prior with this one."""
    r = g.Reader(src)
    w = g.Writer(align=r.align)
    for key, value in r.meta.items():
        if key.startswith(PREFIX_KEY):
            continue
        t = r.meta_types[key]
        if t[0] == g.ARRAY:
            w.add_array(key, t[1], value)
        else:
            w.add(key, t[0], value)
    w.add(PREFIX_KEY + "layer", g.U32, layer)
    w.add(PREFIX_KEY + "features", g.STRING, features)
    w.add(PREFIX_KEY + "distance", g.U32, extra["distance"])
    w.add(PREFIX_KEY + "positive_frac", g.F32, extra["positive_frac"])
    w.add(PREFIX_KEY + "auc", g.F32, extra["auc"])
    for name, ne, tt, _ in r.tensors:
        if not name.startswith(PREFIX_TENSOR):
            w.add_raw_tensor(name, ne, tt, dq.tensor_bytes(r, name))
    w1, b1, w2, b2 = weights
    w.add_tensor(PREFIX_TENSOR + "w1", w1)  # (hidden, n_in) row-major: ne = [n_in, hidden]
    w.add_tensor(PREFIX_TENSOR + "b1", b1)
    w.add_tensor(PREFIX_TENSOR + "w2", w2)
    w.add_tensor(PREFIX_TENSOR + "b2", b2)
    tmp = dst + ".tmp"
    w.write(tmp)
    os.replace(tmp, dst)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--model", required=True, help="the model's GGUF (llama, qwen2, qwen3)")
    ap.add_argument("--traces", nargs="+", default=[], help="traces: .jsonl (see prior_data.py) or .txt files")
    ap.add_argument("--self-generate", type=int, default=0, metavar="N",
                    help="also train on N texts the model generates itself (`kara run`, full KV, self_traces.py)")
    ap.add_argument("--gen-seed", type=int, default=100000, help="sampling seed of the first generated text "
                    "(then +1 each); keep it apart from the seeds of any evaluation text")
    ap.add_argument("--gen-tokens", type=int, default=480, help="tokens generated per text")
    ap.add_argument("--gen-temp", type=float, default=0.8, help="sampling temperature of the generated texts")
    ap.add_argument("--gen-prompt", action="append", default=[], help="a short neutral opening (repeatable, "
                    "cycled); without one every text starts at BOS")
    ap.add_argument("--gen-ctx", type=int, default=0, help="context of the generation (0 = the model's)")
    ap.add_argument("--gen-ignore-eos", action="store_true", help="generate --gen-tokens tokens even past "
                    "end of text (for models that stop early)")
    ap.add_argument("--save-traces", help="write the generated traces to this JSONL (reusable with --traces)")
    ap.add_argument("--out", required=True, help="where to write the model with the prior")
    ap.add_argument("--layer", default="auto", help="layer whose cache rows feed the prior, or auto: the best "
                    "held-out AUC of a short fit on every layer")
    ap.add_argument("--features", default="v+kpair", choices=FEATURES,
                    help="v: the value row; v+kpair: also the norms of the key's RoPE pairs")
    ap.add_argument("--distance", type=int, default=160, help="D: a token is labelled by what queries at least D "
                    "positions later read (default 160 = kara.interval + kara.buffer at their defaults)")
    ap.add_argument("--positive-frac", type=float, default=0.1, help="share of tokens labelled 'read later'")
    ap.add_argument("--kept-frac", type=float, default=0.2, help="kept fraction at which precision and recall "
                    "are reported")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--holdout", type=float, default=0.2, help="share of the traces held out for the metrics")
    ap.add_argument("--max-traces", type=int, default=0, help="use the first N traces (0 = all)")
    ap.add_argument("--max-tokens", type=int, default=4096, help="truncate each trace to this many tokens")
    ap.add_argument("--per-trace", type=int, default=1024, help="labelled tokens drawn per trace (0 = all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kara", default=os.path.join(here, "..", "..", "build", "bin", "kara"),
                    help="the kara binary, to tokenize traces given as text")
    a = ap.parse_args(argv)
    if not a.traces and a.self_generate <= 0:
        ap.error("give --traces FILE..., --self-generate N, or both")
    return a


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    t0 = time.time()
    model = GGUFModel(a.model)
    print(f"{a.model}: {model.arch}, {model.n_layer} layers, {model.n_head_kv} KV heads of {model.head_dim}")
    files = list(a.traces)
    if a.self_generate > 0:
        print(f"generating {a.self_generate} texts with {a.kara} (seeds {a.gen_seed}.."
              f"{a.gen_seed + a.self_generate - 1}, {a.gen_tokens} tokens, temperature {a.gen_temp})")
        recs = self_traces.generate(a.kara, a.model, a.self_generate, a.gen_seed, a.gen_tokens, a.gen_temp,
                                    a.gen_prompt, a.gen_ctx, ignore_eos=a.gen_ignore_eos)
        tmpdir = None
        if a.save_traces:
            path = a.save_traces
        else:
            tmpdir = tempfile.TemporaryDirectory()
            path = os.path.join(tmpdir.name, "self.jsonl")
        self_traces.write(recs, path)
        files.append(path)
    traces = prior_data.read_traces(files, a.kara, a.model, a.max_traces)
    print(f"{len(traces)} traces, {sum(len(t[0]) for t in traces)} tokens")
    layers = list(range(model.n_layer)) if a.layer == "auto" else [int(a.layer)]
    if any(not 0 <= layer < model.n_layer for layer in layers):
        raise SystemExit(f"--layer {a.layer} is outside [0, {model.n_layer})")
    c = prior_data.collect(model, traces, layers, a.distance, a.max_tokens, a.per_trace, a.seed)
    scores = np.concatenate(c.scores)
    trace = np.concatenate(c.trace)
    thr = np.quantile(scores, 1.0 - a.positive_frac)
    y = scores >= thr
    traces_used = np.unique(trace)
    rng = np.random.default_rng(a.seed)
    held = set(rng.choice(traces_used, max(1, int(round(a.holdout * len(traces_used)))), replace=False).tolist())
    te = np.array([t in held for t in trace])
    tr = ~te
    if tr.sum() == 0 or y[tr].sum() == 0:
        raise SystemExit("too few traces to train on: give more or lower --holdout")
    print(f"{len(scores)} labelled tokens ({tr.sum()} train, {te.sum()} held out), 'read later' = label score "
          f">= {thr:.4f} ({y.mean():.1%})")
    n_sel = n_inputs(model, a.features)

    def feats(layer):
        return np.concatenate(c.feats[layer])[:, :n_sel].astype(np.float32)

    if len(layers) > 1:
        print("layer  held-out AUC (short fit)")
        best, best_auc = layers[0], -1.0
        for layer in layers:
            x = feats(layer)
            head = fit(x[tr], y[tr], a.hidden, max(3, a.epochs // 5), a.lr, a.seed)
            s = auc(predict(head, x[te]), y[te])
            print(f"  {layer:4d}  {s:.4f}")
            if s > best_auc:
                best, best_auc = layer, s
        layer = best
    else:
        layer = layers[0]
    x = feats(layer)
    head = fit(x[tr], y[tr], a.hidden, a.epochs, a.lr, a.seed)
    p_te, p_tr = predict(head, x[te]), predict(head, x[tr])
    a_te = auc(p_te, y[te])
    prec, rec = at_fraction(p_te, y[te], a.kept_frac)
    prec_pos, _ = at_fraction(p_te, y[te], a.positive_frac)
    print(f"prior at layer {layer}, features {a.features} ({n_sel} inputs), hidden {a.hidden}:")
    print(f"  held-out AUC {a_te:.4f} (train {auc(p_tr, y[tr]):.4f})")
    print(f"  held-out precision at the top {a.positive_frac:.0%}: {prec_pos:.3f} (chance {y[te].mean():.3f})")
    print(f"  held-out top {a.kept_frac:.0%}: precision {prec:.3f}, recall {rec:.3f} of the 'read later' tokens")
    weights = folded(head)
    gap = np.abs(forward_folded(*weights, x[te][:256]) - p_te[:256]).max()
    if gap > 1e-3:
        raise SystemExit(f"internal error: the folded prior differs from the trained one by {gap:.2e}")
    write_gguf(a.model, a.out, layer, a.features, weights,
               {"distance": a.distance, "positive_frac": a.positive_frac, "auc": float(a_te)})
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes) in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
