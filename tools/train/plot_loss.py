#!/usr/bin/env python3
"""Join the loss curves of one or more consecutive training stages, write the
joined CSV and plot it (smoothed loss per task family; held-out accuracy
where evaluated).

  /usr/bin/python3 tools/train/plot_loss.py [--title T] OUT.csv OUT.svg [JOINED.csv] RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds loss.csv (and eval.csv) written by train.py. A resumed run
repeats the steps after its last checkpoint; the last row of a step is kept.
JOINED.csv, if given first, is an earlier output of this script (the stages
before the RUN_DIRs, whose run folders are gone); its rows are kept as they
are and the RUN_DIRs continue its steps, tokens and seconds.
eval.csv rows: step, tokens, seconds, then accuracies: late tier 1, late
tier 4 and, for runs that trained more families, reuse tier 1, reuse tier 4,
chase tier 1, chase tier 4.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIELDS = ["stage", "stage_step", "step", "tokens", "seconds", "lr", "n_terms", "loss", "masked_frac", "family"]
EVAL_LABELS = ["late tier 1", "late tier 4", "reuse tier 1", "reuse tier 4", "chase tier 1", "chase tier 4"]
EVAL_STYLE = [("o", "#2ca02c"), ("s", "#d62728"), ("^", "#9467bd"), ("D", "#ff7f0e"), ("v", "#17becf"),
              ("P", "#8c564b")]
FAMILY_STYLE = (("late", "#1f77b4", "#bbbbbb"), ("reuse", "#ff7f0e", "#f2d0b0"), ("chase", "#2ca02c", "#c0e0c0"))


def main():
    args = sys.argv[1:]
    title = "kara-reasoner-1m training loss"
    if args[:1] == ["--title"]:
        title, args = args[1], args[2:]
    out_csv, out_plot, runs = args[0], args[1], args[2:]
    joined, evals, bounds = [], [], []
    step0 = tok0 = sec0 = 0
    si = 0
    if runs and runs[0].endswith(".csv"):
        for r in csv.DictReader(open(runs.pop(0))):
            r.setdefault("family", "late")
            r["family"] = r["family"] or "late"
            joined.append({k: r[k] for k in FIELDS})
            if si and int(r["stage"]) != si:
                bounds.append(sec0 / 60)
            si = int(r["stage"])
            step0, tok0, sec0 = int(r["step"]), int(r["tokens"]), float(r["seconds"])
        bounds.append(sec0 / 60)
    for run in runs:
        si += 1
        rows = list(csv.DictReader(open(os.path.join(run, "loss.csv"))))
        last = {int(r["step"]): r for r in rows}
        for k in sorted(last):
            r = last[k]
            joined.append({"stage": si, "stage_step": k, "step": step0 + k, "tokens": tok0 + int(r["tokens"]),
                           "seconds": round(sec0 + float(r["seconds"]), 1), "lr": r["lr"], "n_terms": r["n_terms"],
                           "loss": r["loss"], "masked_frac": r["masked_frac"], "family": r.get("family") or "late"})
        ev_path = os.path.join(run, "eval.csv")
        if os.path.exists(ev_path):
            for line in open(ev_path):
                e = line.strip().split(",")
                if len(e) >= 5:
                    evals.append((sec0 + float(e[2]), [float(x) for x in e[3:]]))
        step0, tok0, sec0 = int(joined[-1]["step"]), int(joined[-1]["tokens"]), float(joined[-1]["seconds"])
        bounds.append(sec0 / 60)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(joined)
    fig, ax = plt.subplots(figsize=(9, 4.8))
    minutes = [float(r["seconds"]) / 60 for r in joined]
    for fam, color, grey in FAMILY_STYLE:
        rows = [r for r in joined if r["family"] == fam]  # drill batches are left out
        if not rows:
            continue
        xs = [float(r["seconds"]) / 60 for r in rows]
        loss = [float(r["loss"]) for r in rows]
        smooth, acc = [], None
        for v in loss:
            acc = v if acc is None else 0.95 * acc + 0.05 * v
            smooth.append(acc)
        ax.plot(xs, loss, color=grey, linewidth=0.5)
        ax.plot(xs, smooth, color=color, label=f"{fam} family loss (EMA 0.95; light: per step)")
    for b in bounds[:-1]:
        ax.axvline(b, color="#888888", linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("training minutes (2 shared CPU cores; dashed lines: stage boundaries)")
    ax.set_ylabel("cross-entropy per thinking token")
    if evals:
        ax2 = ax.twinx()
        for i, label in enumerate(EVAL_LABELS):
            pts = [(t, v[i]) for t, v in evals if len(v) > i]
            if pts:
                m, c = EVAL_STYLE[i]
                ax2.plot([p[0] / 60 for p in pts], [p[1] * 100 for p in pts], m, color=c,
                         label=f"{label} greedy accuracy (held-out)")
        ax2.set_ylabel("accuracy, %")
        ax2.set_ylim(-2, 102)
        ax2.legend(loc="center left", fontsize=7)
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out_plot)
    print(out_csv, out_plot, f"{len(joined)} steps, {joined[-1]['tokens']} tokens, {minutes[-1]:.1f} min")


if __name__ == "__main__":
    main()
