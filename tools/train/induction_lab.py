"""Which part of the architecture stops a lookup by content from forming?

Trains a small decoder, from scratch, on random-order reads of printable
words only (tasks_recall.build_assoc_drill: no fixed offset solves them, so
only an induction head does) and prints the teacher-forced accuracy on the
read characters of a fixed held-out set every --every steps. Each switch
turns one part of the project's layout (model.py) on or off, so a part can
be tried alone:

    --norm pre     RMS norm before each layer and before the unembedding
    --pos rope     NeoX RoPE instead of learned absolute positions
    --rope-base    RoPE's base (model.py's default 10000; Qwen3 ships 1e6)
    --qk-norm      per-head RMS norm of q and k before RoPE
    --mlp          a SwiGLU FFN after each attention layer
    --tied         the unembedding is the embedding matrix
    --emb-std      the embedding's initial standard deviation
    --init small   model.py's initialisation of the linear layers

`--arch project` runs model.py's own Model of the given shape instead, with
the same --tied, --init and --emb-std switches (model.py's defaults are --tied --init
small); the other switches do not apply to it.
docs/TRAINING_PLAIN.md has the results. One run on one thread:

    /usr/bin/python3 tools/train/induction_lab.py --norm pre --pos rope --steps 2000
"""
import argparse
import json
import math
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import model as project
import tasks
import tasks_recall
from copy_probe import fetch_accuracy
from train import batch_tensors


def rms(dim):
    return project.RMSNorm(dim, 1e-6)


class LabLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        d, hd = a.d_model, a.head_dim
        self.a = a
        self.qkv = nn.Linear(d, 3 * a.heads * hd, bias=False)
        self.o = nn.Linear(a.heads * hd, d, bias=False)
        self.n1 = rms(d) if a.norm == "pre" else nn.Identity()
        self.qn = rms(hd) if a.qk_norm else nn.Identity()
        self.kn = rms(hd) if a.qk_norm else nn.Identity()
        if a.mlp:
            self.n2 = rms(d) if a.norm == "pre" else nn.Identity()
            self.gate = nn.Linear(d, 3 * d, bias=False)
            self.up = nn.Linear(d, 3 * d, bias=False)
            self.down = nn.Linear(3 * d, d, bias=False)

    def forward(self, x, cos, sin):
        a = self.a
        B, T, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, a.heads, a.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.qn(q), self.kn(k)
        if cos is not None:
            q, k = project.apply_rope(q, cos, sin), project.apply_rope(k, cos, sin)
        x = x + self.o(project.attend(q, k, v, None, 256).transpose(1, 2).reshape(B, T, -1))
        if a.mlp:
            h = self.n2(x)
            x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return x


class LabModel(nn.Module):
    def __init__(self, a, ctx):
        super().__init__()
        self.a = a
        self.tok = nn.Embedding(tasks.VOCAB_SIZE, a.d_model)
        nn.init.normal_(self.tok.weight, std=a.emb_std)
        self.pos = nn.Embedding(ctx, a.d_model) if a.pos == "learned" else None
        if self.pos is not None:
            nn.init.normal_(self.pos.weight, std=a.emb_std)
        self.layers = nn.ModuleList([LabLayer(a) for _ in range(a.layers)])
        self.nf = rms(a.d_model) if a.norm == "pre" else nn.Identity()
        self.unembed = None if a.tied else nn.Linear(a.d_model, tasks.VOCAB_SIZE, bias=False)
        cos, sin = project.rope_tables(a.head_dim, ctx, a.rope_base)
        if a.init == "small":  # model.py's: every linear N(0, 0.02), the residual outputs 0.02 / sqrt(2L)
            for name, p in self.named_parameters():
                if p.dim() == 2 and not name.startswith(("tok", "pos")):
                    std = 0.02 / math.sqrt(2 * a.layers) if name.endswith(("o.weight", "down.weight")) else 0.02
                    nn.init.normal_(p, std=std)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.tok(ids)
        if self.pos is not None:
            x = x + self.pos.weight[:T]
        rope = (self.cos[:T], self.sin[:T]) if self.a.pos == "rope" else (None, None)
        for layer in self.layers:
            x = layer(x, *rope)
        x = self.nf(x)
        return F.linear(x, self.tok.weight) if self.unembed is None else self.unembed(x)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=("lab", "project"), default="lab")
    ap.add_argument("--norm", choices=("none", "pre"), default="none")
    ap.add_argument("--pos", choices=("learned", "rope"), default="learned")
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--qk-norm", action="store_true")
    ap.add_argument("--mlp", action="store_true")
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--emb-std", type=float, default=0.02)
    ap.add_argument("--init", choices=("torch", "small"), default="torch",
                    help="the linear layers' init: PyTorch's default or model.py's")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2, help="--arch project only")
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warmup")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--words", default="2,12", help="table sizes drawn per training drill: lo,hi")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args()


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ctx = 512
    if a.arch == "project":
        cfg = project.Config(vocab_size=tasks.VOCAB_SIZE, d_model=a.d_model, n_layers=a.layers, n_heads=a.heads,
                             n_kv_heads=a.kv_heads, head_dim=a.head_dim, d_ff=3 * a.d_model, rope_base=a.rope_base,
                             context_length=ctx, tied_embeddings=a.tied, init=a.init,
                             emb_std=a.emb_std)
        m = project.Model(cfg)
    else:
        m = LabModel(a, ctx)
    opt = torch.optim.Adam(m.parameters(), lr=a.lr)
    held = random.Random(99)  # the held-out drills: their own seed, as copy_probe draws them
    test = [tasks_recall.build_assoc_drill(held, tasks, 8) for _ in range(16)]
    rng = random.Random(a.seed)
    lo, hi = (int(x) for x in a.words.split(","))
    t0 = time.time()
    for step in range(1, a.steps + 1):
        ids, tgt = batch_tensors([tasks_recall.build_assoc_drill(rng, tasks, rng.randint(lo, hi))
                                  for _ in range(a.batch)])
        loss = F.cross_entropy(m(ids)[:, :-1].reshape(-1, tasks.VOCAB_SIZE), tgt.reshape(-1))
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, step / max(a.warmup, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % a.every == 0:
            print(json.dumps({"step": step, "loss": round(loss.item(), 3), "reads": round(fetch_accuracy(m, test)[0], 3),
                              "s": round(time.time() - t0)}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
