#!/usr/bin/env python3
"""Plot a run's loss curve (loss.csv, smoothed) and held-out accuracy (eval.csv).

  /usr/bin/python3 tools/train/plot_loss.py tools/train/runs/main tools/train/model/loss.svg
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    run, out = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(open(os.path.join(run, "loss.csv"))))
    # A resumed run repeats the steps after its last checkpoint: keep the last.
    last = {int(r["step"]): r for r in rows}
    rows = [last[k] for k in sorted(last)]
    minutes = [float(r["seconds"]) / 60 for r in rows]
    loss = [float(r["loss"]) for r in rows]
    smooth, acc = [], None
    for v in loss:
        acc = v if acc is None else 0.95 * acc + 0.05 * v
        smooth.append(acc)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(minutes, loss, color="#bbbbbb", linewidth=0.5, label="loss per step")
    ax.plot(minutes, smooth, color="#1f77b4", label="loss (EMA 0.95)")
    ax.set_yscale("log")
    ax.set_xlabel("training minutes (2 shared CPU cores)")
    ax.set_ylabel("cross-entropy per thinking token")
    ev_path = os.path.join(run, "eval.csv")
    if os.path.exists(ev_path):
        ev = [line.strip().split(",") for line in open(ev_path) if line.strip()]
        ax2 = ax.twinx()
        em = [float(e[2]) / 60 for e in ev]
        ax2.plot(em, [float(e[3]) * 100 for e in ev], "o-", color="#2ca02c", label="tier 1 accuracy (25)")
        ax2.plot(em, [float(e[4]) * 100 for e in ev], "s-", color="#d62728", label="tier 4 accuracy (25)")
        ax2.set_ylabel("greedy accuracy on held-out subset, %")
        ax2.set_ylim(-2, 102)
        ax2.legend(loc="center right")
    ax.legend(loc="upper right")
    ax.set_title("kara-reasoner-1m training")
    fig.tight_layout()
    fig.savefig(out)
    print(out)


if __name__ == "__main__":
    main()
