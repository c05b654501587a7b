"""Can a checkpoint copy by content? Teacher-forced accuracy on the drills of
tasks_recall.py, which no shortcut solves: a recall drill reads values back
from a table the thinking wrote, by label and in random order (the lookup
every family's far reads need), and a repeat drill writes a line of random
four-digit numbers twice (the plainest copy there is). Chance is 10% per
digit. The drills are drawn from their own seed, so the numbers are
comparable between checkpoints.

    /usr/bin/python3 tools/train/copy_probe.py --model runs/plain1/ckpt.pt
"""
import argparse
import json
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a training checkpoint (ckpt.pt)")
    ap.add_argument("--n", type=int, default=9, help="drills per row")
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--threads", type=int, default=1)
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
    sys.stdout.flush()


if __name__ == "__main__":
    main()
