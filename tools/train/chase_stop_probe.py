"""Does a checkpoint stop chasing at the prompt's hop count? Teacher-forced
chase transcripts of several node and hop counts; for each, whether the
model's greedy token after the last hop line is `</think>`. The held-out
tiers ask one hop count each (3, 5, 7, 10, 28), so a model can pass them by
guessing the count from the node count; this grid crosses the two, which
tells a count read from the prompt from one guessed (docs/TRAINING_PLAIN.md).

    /usr/bin/python3 tools/train/chase_stop_probe.py --model tools/train/runs/plain3-cycle/ckpt.pt
"""
import argparse
import random
import sys

import torch

import evaluate
import tasks
import tasks_chase


def stops(model, prompt):
    """True when the greedy token after the transcript's last hop line is the
    end of thinking, given the reference transcript before it."""
    ids = tasks.example_for_prompt(prompt)["ids"]
    end = ids.index(tasks.END_THINK)
    with torch.no_grad():
        return int(model(torch.tensor([ids[:end]]))[0, -1].argmax()) == tasks.END_THINK


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--nodes", default="4,8,12,24")
    ap.add_argument("--hops", default="3,5,9,10,11,12,15,19,20,21,28")
    ap.add_argument("--n", type=int, default=3, help="problems per cell")
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    rng = random.Random(a.seed)
    total = right = 0
    for nodes in (int(x) for x in a.nodes.split(",")):
        for hops in (int(x) for x in a.hops.split(",")):
            ok = sum(stops(model, tasks_chase.prompt_text(tasks_chase.make_problem(rng, nodes, hops)))
                     for _ in range(a.n))
            total, right = total + a.n, right + ok
            print(f"nodes {nodes:2d} hops {hops:2d}: stop {ok}/{a.n}", flush=True)
    print(f"all: stop {right}/{total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
