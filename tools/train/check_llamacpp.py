#!/usr/bin/env python3
"""Check an exported GGUF against llama.cpp and against the PyTorch checkpoint.

Builds llamacpp_logits.c against the llama.cpp library that
../shared/bench/llamacpp-ref installs (run that script once first), then for
one held-out problem:
  - llama.cpp's tokenization of the chat text must equal ours (one token per
    byte, specials parsed);
  - llama.cpp's logits at every position must match PyTorch's (max abs diff
    reported, relative to the logit range);
  - llama.cpp's greedy continuation must equal PyTorch's and give the answer.

  /usr/bin/python3 tools/train/check_llamacpp.py tools/train/model/kara-reasoner-1m.gguf \
      tools/train/runs/main/best.pt [--tasks tests/data/late-tier4.jsonl --index 0]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402
import tasks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("KARA_REF_CACHE", os.path.expanduser("~/.cache/kara-llamacpp-ref"))
BINS = os.path.join(CACHE, "linux-x64", "bins", "linux-x64")


def build():
    exe = os.path.join(CACHE, "llamacpp_logits")
    src = os.path.join(HERE, "llamacpp_logits.c")
    if not os.path.exists(os.path.join(BINS, "libllama.so")):
        sys.exit("llama.cpp library missing: run ../shared/bench/llamacpp-ref once to install it")
    if not os.path.exists(exe) or os.path.getmtime(src) > os.path.getmtime(exe):
        subprocess.check_call(["gcc", "-O2", "-std=c11", "-Wall", "-Wextra", src, "-I", os.path.join(CACHE, "include"),
                               "-L", BINS, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + BINS, "-o", exe])
    return exe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("ckpt")
    ap.add_argument("--tasks", default=os.path.join(HERE, "..", "..", "tests", "data", "late-tier1.jsonl"))
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--prefix", type=int, default=120, help="reference thinking tokens appended to the prompt")
    a = ap.parse_args()
    torch.set_num_threads(2)
    exe = build()
    prob = evaluate.read_jsonl(a.tasks)[a.index]
    ex = tasks.example_for_prompt(prob["prompt"])
    ids = ex["ids"][:ex["prompt_len"] + a.prefix]
    text = tasks.decode_ids(ids)
    out_f32 = os.path.join(CACHE, "check_logits.f32")
    env = dict(os.environ, GGML_BACKEND_DIR=BINS)
    n_gen = len(ex["ids"]) - len(ids) + 8
    res = json.loads(subprocess.check_output([exe, a.gguf, out_f32, text, str(n_gen)], env=env))
    ok = True
    if res["prompt"] != ids:
        print("tokenization differs: llama.cpp", res["prompt"][:40], "ours", ids[:40])
        ok = False
    lc = np.fromfile(out_f32, dtype=np.float32).reshape(len(res["prompt"]), res["n_vocab"])
    model = evaluate.load_model(a.ckpt)
    with torch.no_grad():
        pt = model(torch.tensor([ids]))[0].numpy()
    diff = np.abs(lc - pt).max() if lc.shape == pt.shape else float("inf")
    span = pt.max() - pt.min()
    print(f"logits: {lc.shape[0]} positions x {lc.shape[1]}, max |llama.cpp - torch| = {diff:.2e} "
          f"(logit range {span:.1f}); argmax agree at {(lc.argmax(1) == pt.argmax(1)).mean() * 100:.1f}% of positions")
    ok &= bool(diff < 1e-2 * span)
    gen = res["generated"]
    ref = ex["ids"][len(ids):]
    text_gen = tasks.decode_ids(gen)
    ans = text_gen.split("</think>")[-1].replace("<|im_end|>", "").strip()
    print(f"llama.cpp greedy: {len(gen)} tokens, equals reference continuation: {gen == ref}, "
          f"answer {ans!r} vs expected {prob['answer']!r}")
    # PyTorch greedy from the same prefix, with the KV-cached decoding step
    cache = model.new_cache(1, len(ids) + n_gen + 1)
    for pos, t in enumerate(ids[:-1]):
        model.step(torch.tensor([t]), pos, cache)
    tok, mine = ids[-1], []
    for pos in range(len(ids) - 1, len(ids) - 1 + len(gen)):
        tok = int(model.step(torch.tensor([tok]), pos, cache).argmax(-1))
        mine.append(tok)
        if tok == tasks.IM_END:
            break
    same = sum(1 for x, y in zip(mine, gen) if x == y) if mine == gen else \
        next(i for i, (x, y) in enumerate(zip(mine + [-1], gen + [-2])) if x != y)
    print(f"PyTorch greedy: {len(mine)} tokens; identical to llama.cpp's: {mine == gen} "
          f"(first {same} tokens agree)")
    ok &= mine == gen
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
