#!/usr/bin/env python3
"""Greedy evaluation of the reasoning model in PyTorch, with KV policies.

Policies (applied as an attention mask over the cached positions, which is
what an evicting KV cache amounts to: once a position leaves the visible set
it never comes back):
  full    every cached position is visible
  oracle  the prompt, the informative result lines (found in the generated
          text as each line completes: late family "pK=PPPP"; reuse family
          "pK=", "sK=" and "cK=" lines) and the last W positions
  recent  the prompt and the last W' positions, W' = the oracle's whole
          thinking budget (same number of kept thinking tokens)
The budget is retention x the reference thinking length of the problem.

  /usr/bin/python3 tools/train/evaluate.py --model tools/train/runs/main/best.pt \
      --tasks tests/data/late-tier4.jsonl --policy oracle --retention 0.2
"""
import argparse
import json
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402
from model import Config, Model  # noqa: E402

INFO_LINE = {"late": re.compile(rb"^p\d+(:\d+\*\d+)?=\d{4}$"),  # formats 2 and 1
             "reuse": re.compile(rb"^(p\d+=\d{4}|[sc]\d+(=p\d+)?=\d{5,6})$"),
             "chase": re.compile(rb"^(p\d+=|#\d+ gives |node \d+ is )\d{4}$")}


def load_model(path):
    ck = torch.load(path, map_location="cpu")
    m = Model(Config(**ck["config"]))
    m.load_state_dict(ck["model"])
    m.eval()
    return m


def info_tokens_ref(prompt):
    """Number of thinking tokens in informative result lines (with newline)."""
    ex = tasks.example_for_prompt(prompt)
    return sum(1 for k in ex["kind"] if k == tasks.KIND_INFO)


@torch.no_grad()
def generate(model, probs, policy="full", retention=1.0, extra=64):
    """Greedy-decode a batch of problems. Prompts may differ in length: a
    row whose prompt is longer keeps being fed its prompt tokens while the
    others already generate (positions are per token, so nothing shifts).

    Returns list of dicts: text, answer_text, think_tokens, correct.
    """
    B = len(probs)
    pids = [tasks.generation_prompt_ids(p["prompt"]) for p in probs]
    Ps = [len(x) for x in pids]
    P0 = min(Ps)
    T = max(P + p["think_tokens"] for P, p in zip(Ps, probs)) + extra
    cache = model.new_cache(B, T)
    fams = [tasks.prompt_family(p["prompt"]) for p in probs]
    budgets = [int(round(retention * p["think_tokens"])) for p in probs]
    if policy == "oracle":
        ws = torch.tensor([bu - info_tokens_ref(p["prompt"]) for bu, p in zip(budgets, probs)])
    else:
        ws = torch.tensor(budgets)
    plen = torch.tensor(Ps)
    info = torch.zeros(B, T, dtype=torch.bool)
    for b, P in enumerate(Ps):
        info[b, :P] = True  # the prompt is always kept
    out = [[] for _ in range(B)]
    line_start = list(Ps)
    done = torch.zeros(B, dtype=torch.bool)
    for pos in range(P0 - 1):
        model.step(torch.tensor([x[pos] for x in pids]), pos, cache)
    tok = torch.tensor([x[P0 - 1] for x in pids])
    for pos in range(P0 - 1, T - 1):
        vis = None
        if policy != "full":
            j = torch.arange(pos + 1)
            recent = (pos - j)[None, :] < ws[:, None]
            keep = info[:, :pos + 1] if policy == "oracle" else j[None, :] < plen[:, None]
            vis = keep | recent
        logits = model.step(tok, pos, cache, vis)
        tok = logits.argmax(-1)
        for b in range(B):
            if pos + 1 < Ps[b]:  # still in the prompt: feed it
                tok[b] = pids[b][pos + 1]
                continue
            if done[b]:
                continue
            t = int(tok[b])
            out[b].append(t)
            if t == tasks.IM_END:
                done[b] = True
            elif t == 10:  # newline ends a line: mark informative result lines
                npos = pos + 1  # position of this newline token
                line = bytes(x for x in out[b][line_start[b] - Ps[b]:-1] if x < 256)
                if INFO_LINE[fams[b]].match(line):
                    info[b, line_start[b]:npos + 1] = True
                line_start[b] = npos + 1
        if bool(done.all()):
            break
    res = []
    for b, p in enumerate(probs):
        text = tasks.decode_ids(out[b])
        think = out[b].index(tasks.END_THINK) + 1 if tasks.END_THINK in out[b] else len(out[b])
        ans = text.split("</think>")[-1].replace("<|im_end|>", "").strip() if "</think>" in text else ""
        res.append({"id": p["id"], "text": text, "answer_text": ans, "think_tokens": think,
                    "correct": ans == p["answer"]})
    return res


def evaluate(model, probs, policy="full", retention=1.0, batch=25):
    res = []
    for i in range(0, len(probs), batch):
        res.extend(generate(model, probs[i:i + batch], policy, retention))
    acc = sum(r["correct"] for r in res) / len(res)
    think = sum(r["think_tokens"] for r in res) / len(res)
    return acc, think, res


@torch.no_grad()
def teacher_forced(model, probs, policy="full", retention=1.0, wrong=None):
    """Feed each reference transcript under the policy's attention mask and
    report next-token accuracy: over all thinking and answer tokens, over the
    long-range copy tokens (block operands read from the prompt, product
    values fetched by the running sum), and the share of transcripts whose
    fetched product values are all right. Isolates what a KV policy keeps
    from whether free generation drifts. With a list as wrong, every wrong
    prediction is appended to it as a line: problem, position, wanted and
    predicted token, whether it is a fetch, and the 40 tokens before it."""
    tot = ok = ftot = fok = fseq = 0
    for p in probs:
        ex = tasks.example_for_prompt(p["prompt"])
        ids = torch.tensor([ex["ids"]])
        T, P = len(ex["ids"]), ex["prompt_len"]
        kind = torch.tensor(ex["kind"])
        t = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        allowed = j <= t
        if policy != "full":
            budget = int(round(retention * ex["think_len"]))
            n_info = int((kind == tasks.KIND_INFO).sum())
            w = budget - n_info if policy == "oracle" else budget
            G = len(tasks.generation_prompt_ids(p["prompt"]))  # the runtime's prompt ends with '<think>\n'
            keep = (j < G) | ((kind[None, :] == tasks.KIND_INFO) if policy == "oracle" else False)
            allowed = allowed & (keep | (t - j < w))
        pred = model(ids, allowed[None])[0].argmax(-1)[P - 1:T - 1]
        tgt = ids[0, P:]
        right = pred == tgt
        tot += right.numel()
        ok += int(right.sum())
        # fetch tokens: the product values the sum (and check) lines fetch
        fetch = torch.tensor(ex["fetch"][P:]) == 1
        ftot += int(fetch.sum())
        fok += int((right & fetch).sum())
        fseq += int(bool((right | ~fetch).all()))
        if wrong is not None:
            for i in (~right).nonzero().flatten().tolist():
                pos = P + i
                before = tasks.decode_ids(ex["ids"][max(P, pos - 40):pos])
                wrong.append(f"{p['id']} pos {pos}/{T} want {tasks.decode_ids([ex['ids'][pos]])!r} "
                             f"got {tasks.decode_ids([int(pred[i])])!r} fetch={int(fetch[i])} after ...{before!r}")
    return ok / tot, fok / max(ftot, 1), fseq / len(probs)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tasks", nargs="+", required=True)
    ap.add_argument("--policy", nargs="+", default=["full"], choices=["full", "oracle", "recent"])
    ap.add_argument("--retention", type=float, nargs="+", default=[0.2])
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="", help="append result rows to this JSON-lines file")
    ap.add_argument("--show-fail", type=int, default=0)
    ap.add_argument("--teacher-forced", action="store_true", help="score reference transcripts, no generation")
    ap.add_argument("--show-wrong", action="store_true", help="with --teacher-forced: list every wrong token")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    for path in args.tasks:
        probs = read_jsonl(path)
        if args.limit:
            probs = probs[:args.limit]
        for pol in args.policy:
            for ret in (args.retention if pol != "full" else [1.0]):
                t0 = time.time()
                if args.teacher_forced:
                    wrong = [] if args.show_wrong else None
                    tok_acc, fetch_acc, fetch_seq = teacher_forced(model, probs, pol, ret, wrong)
                    for line in wrong or []:
                        print("--- WRONG", os.path.basename(path), line)
                    row = {"tasks": os.path.basename(path), "mode": "teacher-forced", "policy": pol,
                           "retention": ret, "n": len(probs), "token_accuracy": round(tok_acc, 4),
                           "fetch_token_accuracy": round(fetch_acc, 4),
                           "all_fetches_right": round(fetch_seq, 4), "seconds": round(time.time() - t0, 1)}
                    res = []
                else:
                    acc, think, res = evaluate(model, probs, pol, ret)
                    row = {"tasks": os.path.basename(path), "mode": "greedy", "policy": pol, "retention": ret,
                           "n": len(probs), "accuracy": acc, "mean_think_tokens": think,
                           "seconds": round(time.time() - t0, 1)}
                print(json.dumps(row), flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
                fails = [r for r in res if not r["correct"]][:args.show_fail]
                for r in fails:
                    print("--- FAIL", r["id"], "\n" + r["text"])


if __name__ == "__main__":
    main()
