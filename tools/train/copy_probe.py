"""Can a checkpoint copy by content? Teacher-forced accuracy on the drills of
tasks_recall.py, which no layout shortcut of the tasks solves: a recall
drill reads values back from a table the thinking wrote, by label and in
random order (the lookup every family's far reads need), and a repeat drill
writes a line of random four-digit numbers twice (the plainest copy there
is, though a head reading a fixed distance back solves it too). Chance is 10% per
digit. The drills are drawn from their own seed, so the numbers are
comparable between checkpoints.

Rows after those tell a copy by content from a copy by position: printable
words written twice (a 94-symbol alphabet), printable words read back in a
random order (tasks_recall.build_assoc_drill: no fixed offset works), and
four-number repeat lines scored again after one extra space in the first
line (a head that reads a fixed distance back then lands one token off;
one that matches content does not care). --heads prints, per layer and
head, the mean attention on the previous token and, at the random-order
reads, on the position a content copy reads (an induction head).

    /usr/bin/python3 tools/train/copy_probe.py --model runs/plain1/ckpt.pt
"""
import argparse
import json
import math
import random
import sys

import torch

import evaluate
import tasks
import tasks_recall


@torch.no_grad()
def fetch_accuracy(model, examples):
    """Share of the fetch tokens the model predicts right, teacher-forced."""
    ok = tot = 0
    for ex in examples:
        ids = torch.tensor([ex["ids"]])
        pred = model(ids)[0].argmax(-1)
        for p in range(1, len(ex["ids"])):
            if ex["fetch"][p]:
                tot += 1
                ok += int(pred[p - 1]) == ex["ids"][p]
    return ok / max(tot, 1), tot


def with_extra_space(ex):
    """The drill with one more space after the first word of its first
    line, and the fetch flags of the first word of the second line cleared
    (the extra space moves only what comes after it)."""
    ids, kind, fetch = ex["ids"][:], ex["kind"][:], ex["fetch"][:]
    at = ids.index(32, ex["prompt_len"] + 1)
    ids.insert(at, 32)
    kind.insert(at, kind[at])
    fetch.insert(at, 0)
    return dict(ex, ids=ids, kind=kind, fetch=after_first_word(fetch))


def after_first_word(fetch):
    """Fetch flags without the first four fetched characters (the first word)."""
    out, k = fetch[:], 0
    for i, f in enumerate(out):
        if f:
            k += 1
            out[i] = 0 if k <= 4 else 1
    return out


@torch.no_grad()
def head_attention(model, examples):
    """Per layer and head: mean attention on the previous token, and mean
    attention, at each fetch of a random-order read, on the table position
    whose previous token is the token just written (where a content copy
    reads). Returns two (layers, heads) tensors."""
    c = model.c
    prev = torch.zeros(c.n_layers, c.n_heads)
    ind = torch.zeros(c.n_layers, c.n_heads)
    n_ind = 0
    for ex in examples:
        n = len(ex["ids"])
        targets = []
        for p in range(1, n):
            if ex["fetch"][p]:
                src = [j for j in range(1, p - 1) if ex["ids"][j - 1] == ex["ids"][p - 1] and not ex["fetch"][j]]
                if src:
                    targets.append((p - 1, src[0]))
        causal = torch.ones(n, n, dtype=torch.bool).tril()

        def observe(li, q, k):
            kk = k.repeat_interleave(c.n_heads // c.n_kv_heads, dim=1)
            s = (q @ kk.transpose(-1, -2)) / math.sqrt(c.head_dim)
            a = s.masked_fill(~causal, float("-inf")).softmax(-1)[0]
            prev[li] += a[:, torch.arange(1, n), torch.arange(0, n - 1)].mean(-1) / len(examples)
            for qi, kj in targets:
                ind[li] += a[:, qi, kj]

        model(torch.tensor([ex["ids"]]), observe=observe)
        n_ind += len(targets)
    return prev, ind / max(n_ind, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a training checkpoint (ckpt.pt)")
    ap.add_argument("--n", type=int, default=9, help="drills per row")
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--heads", action="store_true", help="also print attention per layer and head")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    ctx = model.c.context_length
    rng = random.Random(a.seed)
    for n in (2, 4, 8, 16):
        exs = [tasks_recall.build_recall_drill(rng, n, tasks.FAMILIES[i % 3], tasks) for i in range(a.n)]
        acc, tot = fetch_accuracy(model, [e for e in exs if len(e["ids"]) <= ctx])
        print(json.dumps({"probe": "recall", "values": n, "fetch_token_accuracy": round(acc, 4), "fetch_tokens": tot}))
    exs = [tasks_recall.build_repeat_drill(rng, tasks) for _ in range(a.n)]
    acc, tot = fetch_accuracy(model, exs)
    print(json.dumps({"probe": "repeat", "fetch_token_accuracy": round(acc, 4), "fetch_tokens": tot}))
    exs = [tasks_recall.build_repeat_drill(rng, tasks, text=True) for _ in range(a.n)]
    acc, tot = fetch_accuracy(model, exs)
    print(json.dumps({"probe": "repeat-text", "fetch_token_accuracy": round(acc, 4), "fetch_tokens": tot}))
    for n in (4, 8):
        acc, tot = fetch_accuracy(model, [tasks_recall.build_assoc_drill(rng, tasks, n) for _ in range(a.n)])
        print(json.dumps({"probe": "assoc", "words": n, "fetch_token_accuracy": round(acc, 4), "fetch_tokens": tot}))
    exs = [tasks_recall.build_repeat_drill(rng, tasks, 4) for _ in range(a.n)]
    same, _ = fetch_accuracy(model, [dict(e, fetch=after_first_word(e["fetch"])) for e in exs])
    moved, _ = fetch_accuracy(model, [with_extra_space(e) for e in exs])
    print(json.dumps({"probe": "repeat-4-words-2-4", "fetch_token_accuracy": round(same, 4),
                      "after_one_extra_space": round(moved, 4)}))
    if a.heads:
        prev, ind = head_attention(model, [tasks_recall.build_assoc_drill(rng, tasks, 8) for _ in range(a.n)])
        torch.set_printoptions(precision=2, sci_mode=False)
        print("attention on the previous token (layers x heads):\n", prev)
        print("attention on a content copy's source at random-order reads (layers x heads):\n", ind)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
