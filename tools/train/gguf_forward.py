"""The forward pass of a llama / qwen2 / qwen3 GGUF model in PyTorch, for
teacher-forcing traces and reading what attention does with them.

Weights come from any GGUF the runtime loads (gguf_dequant.py decodes F32,
F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K to float32). The
pass follows docs/ARCHITECTURE.md ("Architectures"): RMSNorm with the
file's epsilon, Q/K/V (+ biases for qwen2), per-head RMSNorm of q and k
(qwen3), RoPE on interleaved pairs (llama; the GGUF stores Q/K rows permuted
for it) or half-split pairs (qwen2, qwen3) over the first rope dims, GQA,
SwiGLU, tied embeddings when output.weight is absent.

`run(ids, ...)` returns the logits and, on request, what the retention
prior needs (retention_prior.py): the value rows and key-pair norms of one
layer and, per layer, the attention mass each token receives from queries
at least D positions later.

  /usr/bin/python3 tools/train/gguf_forward.py --check   # against ../shared/reference ($KARA_SHARED)
"""
import argparse
import glob
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_dequant as dq  # noqa: E402
import gguf_io as g  # noqa: E402

ARCHS = {"llama": dict(neox=False, bias=False, qk_norm=False),
         "qwen2": dict(neox=True, bias=True, qk_norm=False),
         "qwen3": dict(neox=True, bias=False, qk_norm=True)}


class GGUFModel:
    def __init__(self, path):
        r = g.Reader(path)
        self.reader = r
        arch = r.meta.get("general.architecture")
        if arch not in ARCHS:
            raise ValueError(f"{path}: architecture '{arch}' is not supported (llama, qwen2, qwen3)")
        self.arch = arch
        self.__dict__.update(ARCHS[arch])

        def hp(key, default=None):
            v = r.meta.get(f"{arch}.{key}", default)
            if v is None:
                raise ValueError(f"{path}: metadata key '{arch}.{key}' is missing")
            return v

        self.n_embd = hp("embedding_length")
        self.n_layer = hp("block_count")
        self.n_head = hp("attention.head_count")
        self.n_head_kv = hp("attention.head_count_kv", self.n_head)
        self.head_dim = hp("attention.key_length", self.n_embd // self.n_head)
        self.rope_dim = hp("rope.dimension_count", self.head_dim)
        self.rope_base = float(hp("rope.freq_base", 10000.0))
        self.eps = float(hp("attention.layer_norm_rms_epsilon", 1e-5))
        names = {t[0] for t in r.tensors}

        def w(name):
            return torch.from_numpy(np.ascontiguousarray(dq.tensor(r, name), dtype=np.float32))

        self.tok = w("token_embd.weight")
        self.out = w("output.weight") if "output.weight" in names else self.tok
        self.out_norm = w("output_norm.weight")
        self.layers = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            L = {k: w(p + k + ".weight") for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                     "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            if self.bias:
                for k in ("attn_q", "attn_k", "attn_v"):
                    L[k + ".bias"] = w(p + k + ".bias")
            if self.qk_norm:
                L["attn_q_norm"] = w(p + "attn_q_norm.weight")
                L["attn_k_norm"] = w(p + "attn_k_norm.weight")
            self.layers.append(L)
        self.n_vocab = self.tok.shape[0]

    def _norm(self, x, wt):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * wt

    def _rope(self, x, pos):
        """x: (heads, T, d) rotated at positions pos (T,) over the first rope_dim dims."""
        rd = self.rope_dim
        inv = 1.0 / (self.rope_base ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd))
        ang = pos.double()[:, None] * inv[None, :]
        cos, sin = torch.cos(ang).float(), torch.sin(ang).float()
        xr, rest = x[..., :rd], x[..., rd:]
        if self.neox:
            a, b = xr[..., :rd // 2], xr[..., rd // 2:]
            y = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
        else:
            a, b = xr[..., 0::2], xr[..., 1::2]
            y = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
        return torch.cat([y, rest], -1)

    def key_pair_norms(self, k):
        """Norms of the pairs RoPE rotates together, per KV head: (T, Hkv * rope_dim / 2). A rotation
        keeps a pair's norm, so these do not depend on the token's position."""
        rd = self.rope_dim
        kr = k[..., :rd]
        a, b = (kr[..., :rd // 2], kr[..., rd // 2:]) if self.neox else (kr[..., 0::2], kr[..., 1::2])
        n = torch.sqrt(a * a + b * b)  # (Hkv, T, rd / 2)
        return n.transpose(0, 1).reshape(k.shape[1], -1)

    @torch.no_grad()
    def run(self, ids, feature_layers=(), distance=None, chunk=256, kv_f16=True, visible=None):
        """Teacher-force ids (a list of token ids, one sequence from position 0).

        Returns a dict: logits (T, V); for each layer in feature_layers, feats[l] = (v (T, Hkv*d), kpair
        (T, Hkv*rope_dim/2)), both rounded through f16 when kv_f16 (what the runtime's f16 KV cache holds);
        with distance D, far[l] = (T, 2, H): for each key j and head, the attention mass it receives from
        queries i >= j + D, summed over those queries (index 0) and its largest single probability (1).
        visible (T, T) bool: row i's keys; a False one is hidden from query i in every layer, which is
        what an evicting cache replayed teacher-forced computes (oracle_text.py).
        """
        T = len(ids)
        pos = torch.arange(T)
        x = self.tok[torch.tensor(ids)]
        H, Hkv, d = self.n_head, self.n_head_kv, self.head_dim
        grp = H // Hkv
        out = {"feats": {}, "far": {}}
        for il, L in enumerate(self.layers):
            h = self._norm(x, L["attn_norm"])
            q = h @ L["attn_q"].T
            k = h @ L["attn_k"].T
            v = h @ L["attn_v"].T
            if self.bias:
                q, k, v = q + L["attn_q.bias"], k + L["attn_k.bias"], v + L["attn_v.bias"]
            q = q.view(T, H, d).transpose(0, 1)
            k = k.view(T, Hkv, d).transpose(0, 1)
            v = v.view(T, Hkv, d).transpose(0, 1)
            if self.qk_norm:
                q = self._norm(q, L["attn_q_norm"])
                k = self._norm(k, L["attn_k_norm"])
            if il in feature_layers:
                rnd = (lambda t: t.half().float()) if kv_f16 else (lambda t: t)
                out["feats"][il] = (rnd(v.transpose(0, 1).reshape(T, Hkv * d)), rnd(self.key_pair_norms(k)))
            q, k = self._rope(q, pos), self._rope(k, pos)
            qg = q.view(Hkv, grp, T, d)
            far_sum = torch.zeros(H, T) if distance is not None else None
            far_max = torch.zeros(H, T) if distance is not None else None
            o = torch.empty(Hkv, grp, T, d)
            for q0 in range(0, T, chunk):
                q1 = min(T, q0 + chunk)
                s = torch.matmul(qg[:, :, q0:q1], k[:, None, :q1].transpose(-1, -2)) / math.sqrt(d)
                qi = torch.arange(q0, q1)[:, None]
                kj = torch.arange(q1)[None, :]
                s = s.masked_fill(kj > qi, float("-inf"))
                if visible is not None:
                    s = s.masked_fill(~visible[q0:q1, :q1], float("-inf"))
                p = torch.softmax(s, -1)
                o[:, :, q0:q1] = torch.matmul(p, v[:, None, :q1])
                if distance is not None:
                    pf = (p * (qi - kj >= distance)).reshape(H, q1 - q0, q1)
                    far_sum[:, :q1] += pf.sum(1)
                    far_max[:, :q1] = torch.maximum(far_max[:, :q1], pf.max(1).values)
            if distance is not None:
                out["far"][il] = torch.stack([far_sum, far_max], 0).permute(2, 0, 1)  # (T, 2, H)
            x = x + o.reshape(H, T, d).transpose(0, 1).reshape(T, H * d) @ L["attn_output"].T
            h = self._norm(x, L["ffn_norm"])
            x = x + (torch.nn.functional.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        out["logits"] = self._norm(x, self.out_norm) @ self.out.T
        return out


def check(ref_dir, models_dir):
    """Logits of every reference model against llama.cpp's (../shared/reference/README.md)."""
    worst = 0.0
    for js in sorted(glob.glob(os.path.join(ref_dir, "*.json"))):
        meta = json.load(open(js))
        name = meta["model_file"]
        path = next((p for p in glob.glob(os.path.join(models_dir, "**", name), recursive=True)), None)
        if not path:
            print(f"{name}: model missing, skipped")
            continue
        m = GGUFModel(path)
        toks = meta["teacher_forced_tokens"]
        ref = np.fromfile(os.path.join(ref_dir, meta["logits_file"]), "<f4").reshape(len(toks), -1)
        got = m.run(toks)["logits"].numpy()
        diff = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-6)
        agree = (got.argmax(1) == ref.argmax(1)).mean()
        types = sorted({dq.type_name(t[2]) for t in m.reader.tensors})
        print(f"{name:40s} {m.arch:6s} {'/'.join(types):22s} max |diff| / max |logit| {diff:.2e}  "
              f"argmax agreement {agree:.1%}")
        worst = max(worst, diff)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.environ.get("KARA_SHARED", os.path.join(here, "..", "..", "..", "shared"))
    ap.add_argument("--check", action="store_true", help="compare logits with the llama.cpp references")
    ap.add_argument("--reference", default=os.path.join(shared, "reference"))
    ap.add_argument("--models", default=os.path.join(shared, "models"))
    a = ap.parse_args()
    torch.set_num_threads(2)
    if a.check:
        worst = check(a.reference, a.models)
        print(f"worst relative difference {worst:.2e}")
        sys.exit(0 if worst < 2e-2 else 1)


if __name__ == "__main__":
    main()
