#!/usr/bin/env python3
"""Join the loss curves of one or more consecutive training stages, write the
joined CSV and plot it (smoothed loss; held-out accuracy where evaluated).

  /usr/bin/python3 tools/train/plot_loss.py OUT.csv OUT.svg RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds loss.csv (and eval.csv) written by train.py. A resumed run
repeats the steps after its last checkpoint; the last row of a step is kept.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out_csv, out_plot, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    joined, evals, bounds = [], [], []
    step0 = tok0 = sec0 = 0
    for si, run in enumerate(runs, 1):
        rows = list(csv.DictReader(open(os.path.join(run, "loss.csv"))))
        last = {int(r["step"]): r for r in rows}
        for k in sorted(last):
            r = last[k]
            joined.append({"stage": si, "stage_step": k, "step": step0 + k, "tokens": tok0 + int(r["tokens"]),
                           "seconds": round(sec0 + float(r["seconds"]), 1), "lr": r["lr"], "n_terms": r["n_terms"],
                           "loss": r["loss"], "masked_frac": r["masked_frac"]})
        ev_path = os.path.join(run, "eval.csv")
        if os.path.exists(ev_path):
            for line in open(ev_path):
                e = line.strip().split(",")
                if len(e) >= 5:
                    evals.append((sec0 + float(e[2]), float(e[3]), float(e[4])))
        step0, tok0, sec0 = joined[-1]["step"], joined[-1]["tokens"], joined[-1]["seconds"]
        bounds.append(sec0 / 60)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(joined[0]))
        w.writeheader()
        w.writerows(joined)
    minutes = [r["seconds"] / 60 for r in joined]
    loss = [float(r["loss"]) for r in joined]
    smooth, acc = [], None
    for v in loss:
        acc = v if acc is None else 0.95 * acc + 0.05 * v
        smooth.append(acc)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(minutes, loss, color="#bbbbbb", linewidth=0.5, label="loss per step")
    ax.plot(minutes, smooth, color="#1f77b4", label="loss (EMA 0.95)")
    for b in bounds[:-1]:
        ax.axvline(b, color="#888888", linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("training minutes (2 shared CPU cores; dashed lines: stage boundaries)")
    ax.set_ylabel("cross-entropy per thinking token")
    if evals:
        ax2 = ax.twinx()
        ax2.plot([e[0] / 60 for e in evals], [e[1] * 100 for e in evals], "o", color="#2ca02c",
                 label="tier 1 greedy accuracy (25 held-out)")
        ax2.plot([e[0] / 60 for e in evals], [e[2] * 100 for e in evals], "s", color="#d62728",
                 label="tier 4 greedy accuracy (25 held-out)")
        ax2.set_ylabel("accuracy, %")
        ax2.set_ylim(-2, 102)
        ax2.legend(loc="center right", fontsize=8)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("kara-reasoner-1m training loss")
    fig.tight_layout()
    fig.savefig(out_plot)
    print(out_csv, out_plot, f"{len(joined)} steps, {joined[-1]['tokens']} tokens, {minutes[-1]:.1f} min")


if __name__ == "__main__":
    main()
