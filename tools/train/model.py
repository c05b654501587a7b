"""Qwen3-architecture decoder in PyTorch, laid out the way llama.cpp runs it.

RMSNorm before attention and FFN, per-head RMSNorm on q and k (QK-norm)
applied before RoPE, grouped-query attention, NeoX-style RoPE (rotate the
pairs (i, i + d/2) of each head, as llama.cpp does for qwen3), SwiGLU FFN,
tied input/output embeddings, no biases.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, vocab_size=261, d_model=128, n_layers=4, n_heads=4, n_kv_heads=2,
                 head_dim=32, d_ff=384, rope_base=10000.0, rms_eps=1e-6, context_length=2048,
                 tied_embeddings=True, init="small", emb_std=0.02):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = head_dim
        self.d_ff = d_ff
        self.rope_base = rope_base
        self.rms_eps = rms_eps
        self.context_length = context_length
        # an untied unembedding exports as output.weight, which the runtime
        # and llama.cpp load; tools/train/induction_lab.py measures both
        self.tied_embeddings = tied_embeddings
        # "small": every linear N(0, 0.02), the residual outputs scaled by
        # 1/sqrt(2L) (the shipped models); "torch": PyTorch's defaults
        self.init = init
        self.emb_std = emb_std  # the token embedding's initial standard deviation

    def to_dict(self):
        return dict(self.__dict__)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, max_pos, base):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """NeoX rotation: pairs (i, i + d/2). x: (..., T, d); cos/sin: (T, d/2)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.attn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.wq = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.ffn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.w_gate = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_up = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.w_down = nn.Linear(c.d_ff, c.d_model, bias=False)

    def qkv(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.q_norm(self.wq(h).view(B, T, c.n_heads, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.wk(h).view(B, T, c.n_kv_heads, c.head_dim)).transpose(1, 2)
        v = self.wv(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def ffn(self, x):
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


def attend(q, k, v, allowed, chunk):
    """Causal grouped-query attention, computed in query chunks so that keys
    after the chunk's end are never touched (torch 1.13 has no fused kernel).

    q: (B, H, T, d); k, v: (B, KVH, T, d); allowed: None (plain causal) or a
    bool tensor (B, T, T) that is already causal.
    """
    B, H, T, d = q.shape
    kvh = k.shape[1]
    g = H // kvh
    qg = q.view(B, kvh, g, T, d)
    scale = 1.0 / math.sqrt(d)
    outs = []
    for q0 in range(0, T, chunk):
        q1 = min(T, q0 + chunk)
        s = torch.matmul(qg[:, :, :, q0:q1], k[:, :, None, :q1].transpose(-1, -2)) * scale
        if allowed is None:
            tri = torch.ones(q1 - q0, q1, dtype=torch.bool).tril(q0)
            s = s.masked_fill(~tri, float("-inf"))
        else:
            s = s.masked_fill(~allowed[:, None, None, q0:q1, :q1], float("-inf"))
        p = torch.softmax(s, dim=-1)
        outs.append(torch.matmul(p, v[:, :, None, :q1]))
    o = torch.cat(outs, dim=3)  # (B, kvh, g, T, d)
    return o.reshape(B, H, T, d)


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.n_layers)])
        self.norm = RMSNorm(c.d_model, c.rms_eps)
        self.out = None if c.tied_embeddings else nn.Linear(c.d_model, c.vocab_size, bias=False)
        cos, sin = rope_tables(c.head_dim, c.context_length, c.rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        if c.init == "small":
            self.apply(lambda m: self._init(m, c.emb_std))
            for b in self.blocks:
                nn.init.normal_(b.wo.weight, std=0.02 / math.sqrt(2 * c.n_layers))
                nn.init.normal_(b.w_down.weight, std=0.02 / math.sqrt(2 * c.n_layers))
        elif c.init == "torch":
            nn.init.normal_(self.tok.weight, std=c.emb_std)
        else:
            raise ValueError(f"unknown init {c.init!r}: small or torch")

    @staticmethod
    def _init(m, emb_std):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=emb_std)

    def unembed(self, x):
        return F.linear(self.norm(x), self.tok.weight if self.out is None else self.out.weight)

    def forward(self, ids, allowed=None, chunk=256, observe=None):
        """Full-sequence forward; returns logits (B, T, V). observe, if
        given, is called as observe(layer, q, k) with each layer's rotated
        queries and keys (probes that read attention patterns)."""
        B, T = ids.shape
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.tok(ids)
        for li, b in enumerate(self.blocks):
            q, k, v = b.qkv(x, cos, sin)
            if observe is not None:
                observe(li, q, k)
            o = attend(q, k, v, allowed, chunk)
            x = x + b.wo(o.transpose(1, 2).reshape(B, T, -1))
            x = b.ffn(x)
        return self.unembed(x)

    @torch.no_grad()
    def step(self, ids, pos, cache, visible=None, attn_max=None):
        """One decoding step with a KV cache.

        ids: (B,) tokens at position pos (same for all rows). cache: list of
        (K, V) tensors (B, KVH, Tmax, d) per layer. visible: None or a bool
        tensor (B, pos + 1) saying which cached positions the query may see.
        attn_max: None or a tensor (B, >= pos + 1) that takes, per cached
        position, the largest attention any layer and head gives it here.
        Returns logits (B, V).
        """
        c = self.c
        B = ids.shape[0]
        x = self.tok(ids)[:, None, :]
        cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
        g = c.n_heads // c.n_kv_heads
        for b, (K, V) in zip(self.blocks, cache):
            q, k, v = b.qkv(x, cos, sin)
            K[:, :, pos:pos + 1] = k
            V[:, :, pos:pos + 1] = v
            qg = q.view(B, c.n_kv_heads, g, 1, c.head_dim)
            s = torch.matmul(qg, K[:, :, None, :pos + 1].transpose(-1, -2)) / math.sqrt(c.head_dim)
            if visible is not None:
                s = s.masked_fill(~visible[:, None, None, None, :], float("-inf"))
            p = torch.softmax(s, -1)
            if attn_max is not None:
                got = p.reshape(B, -1, pos + 1).max(1).values
                attn_max[:, :pos + 1] = torch.maximum(attn_max[:, :pos + 1], got)
            o = torch.matmul(p, V[:, :, None, :pos + 1])
            x = x + b.wo(o.reshape(B, 1, -1))
            x = b.ffn(x)
        return self.unembed(x)[:, 0]

    def new_cache(self, B, T):
        c = self.c
        return [(torch.zeros(B, c.n_kv_heads, T, c.head_dim), torch.zeros(B, c.n_kv_heads, T, c.head_dim))
                for _ in range(c.n_layers)]
