#!/usr/bin/env python3
"""Transcripts of the reasoning model's training tasks as retention-prior traces.

Draws problems from the training mix of tasks.py (tasks.TrainStream: the
held-out sets' problems are left out) and writes each full chat transcript
(prompt, thinking, answer) as {"tokens": [...], "prompt_tokens": P}, P the
tokens the runtime feeds as the prompt (up to and including the newline
after <think>). The model solves these ~99% of the time, so the reference
transcript is what it writes itself.

  /usr/bin/python3 tools/train/reasoner_traces.py --count 40 --seed 4321 --families late --out traces.jsonl
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--heldout-seed", type=int, default=1234, help="seed of the held-out sets to leave out")
    ap.add_argument("--exclude-seeds", type=int, nargs="*", default=[],
                    help="seeds of further held-out sets to leave out (the plain model's: 777 9001 777001 4601-4604)")
    ap.add_argument("--families", default="late", help="task families, comma-separated (late, reuse, chase)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    stream = tasks.TrainStream(a.seed, tasks.excluded_terms([a.heldout_seed] + a.exclude_seeds), tokens_per_batch=1,
                               families=tuple(a.families.split(",")))
    n = 0
    with open(a.out, "w") as f:
        while n < a.count:
            _, _, exs = stream.next_batch()
            for ex in exs[:a.count - n]:
                ids, p = ex["ids"], ex["prompt_len"]
                if p < len(ids) and ids[p] == 10:  # the newline after <think> belongs to the prompt
                    p += 1
                f.write(json.dumps({"tokens": ids, "prompt_tokens": p}) + "\n")
                n += 1
    print(f"{a.out}: {n} transcripts")


if __name__ == "__main__":
    main()
