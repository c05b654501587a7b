#!/usr/bin/env python3
"""Export a trained checkpoint as a GGUF v3 file with arch qwen3.

  /usr/bin/python3 tools/train/export_gguf.py tools/train/runs/main/best.pt \
      tools/train/model/kara-reasoner-1m.gguf [--f16]

Tokenizer: byte-level "gpt2" with pre-tokenizer "qwen2". Tokens 0..255 are
the GPT-2 byte-to-unicode characters in byte order (one token per byte), then
<|endoftext|>, <|im_start|>, <|im_end|> (control) and <think>, </think>
(user-defined, as Qwen3 marks them). No merges: every byte stays one token,
which is exactly how the model was trained.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402
import tasks  # noqa: E402

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)


def byte_to_unicode():
    """GPT-2's reversible map from bytes to printable unicode characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def export(ckpt_path, out_path, f16=False, name="kara-reasoner-1m"):
    ck = torch.load(ckpt_path, map_location="cpu")
    c = ck["config"]
    sd = {k: v.float().numpy() for k, v in ck["model"].items()}
    w = g.Writer()
    w.add("general.architecture", g.STRING, "qwen3")
    w.add("general.name", g.STRING, name)
    w.add("general.file_type", g.U32, 1 if f16 else 0)
    w.add("qwen3.block_count", g.U32, c["n_layers"])
    w.add("qwen3.context_length", g.U32, c["context_length"])
    w.add("qwen3.embedding_length", g.U32, c["d_model"])
    w.add("qwen3.feed_forward_length", g.U32, c["d_ff"])
    w.add("qwen3.attention.head_count", g.U32, c["n_heads"])
    w.add("qwen3.attention.head_count_kv", g.U32, c["n_kv_heads"])
    w.add("qwen3.attention.key_length", g.U32, c["head_dim"])
    w.add("qwen3.attention.value_length", g.U32, c["head_dim"])
    w.add("qwen3.attention.layer_norm_rms_epsilon", g.F32, c["rms_eps"])
    w.add("qwen3.rope.freq_base", g.F32, c["rope_base"])
    b2u = byte_to_unicode()
    tokens = [b2u[b] for b in range(256)] + list(tasks.SPECIALS)
    types = [TOKEN_NORMAL] * 256 + [TOKEN_CONTROL] * 3 + [TOKEN_USER_DEFINED] * 2
    assert len(tokens) == c["vocab_size"] == tasks.VOCAB_SIZE
    w.add("tokenizer.ggml.model", g.STRING, "gpt2")
    w.add("tokenizer.ggml.pre", g.STRING, "qwen2")
    w.add_array("tokenizer.ggml.tokens", g.STRING, tokens)
    w.add_array("tokenizer.ggml.token_type", g.I32, types)
    w.add_array("tokenizer.ggml.merges", g.STRING, [])
    w.add("tokenizer.ggml.bos_token_id", g.U32, tasks.ENDOFTEXT)
    w.add("tokenizer.ggml.eos_token_id", g.U32, tasks.IM_END)
    w.add("tokenizer.ggml.eot_token_id", g.U32, tasks.IM_END)
    w.add("tokenizer.ggml.padding_token_id", g.U32, tasks.ENDOFTEXT)
    w.add("tokenizer.ggml.add_bos_token", g.BOOL, False)
    w.add("tokenizer.chat_template", g.STRING, CHAT_TEMPLATE)
    # trained on one problem per conversation: `kara chat` says so and suggests /clear
    w.add("kara.chat.single_turn", g.BOOL, True)

    big = g.GGML_F16 if f16 else g.GGML_F32
    w.add_tensor("token_embd.weight", sd["tok.weight"], big)
    for i in range(c["n_layers"]):
        p = f"blocks.{i}."
        o = f"blk.{i}."
        w.add_tensor(o + "attn_norm.weight", sd[p + "attn_norm.weight"])
        w.add_tensor(o + "attn_q.weight", sd[p + "wq.weight"], big)
        w.add_tensor(o + "attn_k.weight", sd[p + "wk.weight"], big)
        w.add_tensor(o + "attn_v.weight", sd[p + "wv.weight"], big)
        w.add_tensor(o + "attn_output.weight", sd[p + "wo.weight"], big)
        w.add_tensor(o + "attn_q_norm.weight", sd[p + "q_norm.weight"])
        w.add_tensor(o + "attn_k_norm.weight", sd[p + "k_norm.weight"])
        w.add_tensor(o + "ffn_norm.weight", sd[p + "ffn_norm.weight"])
        w.add_tensor(o + "ffn_gate.weight", sd[p + "w_gate.weight"], big)
        w.add_tensor(o + "ffn_up.weight", sd[p + "w_up.weight"], big)
        w.add_tensor(o + "ffn_down.weight", sd[p + "w_down.weight"], big)
    w.add_tensor("output_norm.weight", sd["norm.weight"])
    if "out.weight" in sd:  # an untied unembedding (model.Config.tied_embeddings)
        w.add_tensor("output.weight", sd["out.weight"], big)
    w.write(out_path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--f16", action="store_true")
    ap.add_argument("--name", default="kara-reasoner-1m")
    a = ap.parse_args()
    export(a.ckpt, a.out, a.f16, a.name)
    r = g.Reader(a.out)
    print(f"{a.out}: {os.path.getsize(a.out)} bytes, {len(r.tensors)} tensors, {len(r.meta)} metadata keys")


if __name__ == "__main__":
    main()
