#!/usr/bin/env python3
"""Accuracy of every KV method by retention and by forced budget, for both task families.

For each family, tier and Kara interval, generates a held-out set with tools/train/tasks.py
(--seed, --n: a seed never used in training or tuning gives problems nobody has seen), runs
`kara eval` on it (full, then every method under caps on its peak KV bytes as shares of full's, and
at fixed per-window retentions, where the on-demand methods are capped at kara/per_window's peak
bytes) and joins the results:

  DIR/matrix.csv   every row of every run, with family, tier and interval columns
  DIR/matrix.md    one table: accuracy by method (columns) and family / tier / interval / axis / x (rows)
  DIR/accuracy.svg accuracy against retention and against budget share, every method, one family
                   (--plot-family), mean over tiers, at --plot-interval

  /usr/bin/python3 tools/kv_matrix.py -m tools/train/model/kara-reasoner-1m.gguf --seed 9001 --n 50 \\
      --out docs/kv_eval/matrix [--jobs 2] [-- more kara eval flags]

Runs --jobs evaluations at once (each `kara eval -t 1`), so a 2-core machine does two.
"""
import argparse
import csv
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = "full,kara,kara/per_window,snapkv,streaming,h2o,rkv,lazy,chunkkv,recent,random"


def make_set(args, family, tier):
    path = os.path.join(args.out, "sets", f"{family}-tier{tier}-s{args.seed}-n{args.n}.jsonl")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run([sys.executable, os.path.join(HERE, "train", "tasks.py"), "--family", family, "--tier",
                        str(tier), "--n", str(args.n), "--seed", str(args.seed), "--out", path], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def run_eval(args, family, tier, interval):
    tasks = make_set(args, family, tier)
    out = os.path.join(args.out, "runs", f"{family}-t{tier}-i{interval}.csv")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not (args.reuse and os.path.exists(out)):
        cmd = [args.kara, "eval", "-m", args.model, "-t", "1", "--tasks", tasks, "--methods", args.methods,
               "--budgets", args.budgets, "--retentions", args.retentions, "--kv-interval", str(interval),
               "--out", out] + args.extra
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # exit 1: the run finished with error rows (a method that did not fit its cap), which the CSV marks
        if r.returncode not in (0, 1) or not os.path.exists(out):
            print(f"{family} tier {tier} interval {interval}: exit {r.returncode}: {r.stderr.strip()[-400:]}",
                  file=sys.stderr)
            return []
    with open(out) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r.update(family=family, tier=tier, interval=interval)
    print(f"{family} tier {tier} interval {interval}: {len(rows)} rows", flush=True)
    return rows


def cell(r):
    if r is None:
        return ""
    n, ok = int(r["n"]), int(r["correct"])
    failed = int(r.get("failed") or 0)
    if n and failed == n:
        return "n/r"
    mark = "!" if r.get("status") == "error" else ""  # some problems could not run within the cap
    return f"{100.0 * ok / n:.0f}{mark}" if n else ""


def write_table(args, rows):
    methods = [m for m in args.methods.split(",") if m != "full"]
    by = {}
    for r in rows:
        by[(r["family"], r["tier"], r["interval"], r["axis"], r["x"], r["label"])] = r
    keys = sorted({(r["family"], r["tier"], r["interval"], r["axis"], r["x"]) for r in rows if r["axis"] != "-"},
                  key=lambda k: (k[0], k[1], k[2], k[3], -float(k[4])))
    lines = ["| family | tier | interval | axis | x | full | " + " | ".join(methods) + " |",
             "|---|---:|---:|---|---:|---:|" + "---:|" * len(methods)]
    for k in keys:
        full = by.get(k[:3] + ("-", "1.000", "full"))
        vals = [cell(by.get(k + (m,))) for m in methods]
        best = max((float(v.rstrip("!")) for v in vals if v not in ("", "n/r")), default=None)
        vals = [f"**{v}**" if best and v not in ("", "n/r") and float(v.rstrip("!")) == best else v for v in vals]
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {cell(full)} | " + " | ".join(vals) + " |")
    with open(os.path.join(args.out, "matrix.md"), "w") as f:
        f.write("Accuracy (%) of each method; `n/r`: the method could not run any problem within its cap; `!`: some problems could not. Bold: the best (when above 0).\n\n")
        f.write("\n".join(lines) + "\n")


def plot(args, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fam, iv = args.plot_family, args.plot_interval
    sel = [r for r in rows if r["family"] == fam and r["interval"] == iv and r["axis"] != "-"]
    full = [r for r in rows if r["family"] == fam and r["interval"] == iv and r["label"] == "full"]
    full_acc = sum(float(r["accuracy"]) for r in full) / len(full) if full else None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, axis, title in ((axes[0], "retention", "fixed retention per window"),
                            (axes[1], "budget", "budget share of full's peak (on demand)")):
        for ci, m in enumerate([m for m in args.methods.split(",") if m != "full"]):
            pts = {}
            for r in sel:
                if r["axis"] == axis and r["label"] == m:
                    pts.setdefault(float(r["x"]), []).append(float(r["accuracy"]))
            if not pts:
                continue
            xs = sorted(pts)
            ax.plot(xs, [100 * sum(pts[x]) / len(pts[x]) for x in xs], marker="o", color=f"C{ci % 10}",
                    lw=2.5 if m.startswith("kara") else 1.2, label=m)
        if full_acc is not None:
            ax.axhline(100 * full_acc, color="black", ls="--", lw=1, label="full KV")
        ax.set_title(title)
        ax.set_xlabel(axis)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"accuracy, % (mean of tiers {args.tiers})")
    axes[1].legend(fontsize=7, loc="upper left")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{fam} family, interval {iv}, {args.n} held-out problems per tier (seed {args.seed})")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "accuracy.svg"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kara", default="build/bin/kara")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--families", default="reuse,late")
    ap.add_argument("--tiers", default="1,2,3,4")
    ap.add_argument("--intervals", default="96,128,160")
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--budgets", default="0.3,0.2,0.1")
    ap.add_argument("--retentions", default="0.3,0.2,0.1")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="keep runs whose CSV exists")
    ap.add_argument("--plot-family", default="reuse")
    ap.add_argument("--plot-interval", type=int, default=128)
    ap.add_argument("--out", required=True)
    ap.add_argument("extra", nargs="*", help="more kara eval options after --")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    todo = [(f, int(t), int(i)) for f in args.families.split(",") for t in args.tiers.split(",")
            for i in args.intervals.split(",")]
    # the longest runs first, so the pool ends together
    todo.sort(key=lambda x: -x[1])
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda x: run_eval(args, *x), todo))
    rows = [r for rs in results for r in rs]
    keys = ["family", "tier", "interval"] + [k for k in (rows[0].keys() if rows else []) if
                                              k not in ("family", "tier", "interval")]
    with open(os.path.join(args.out, "matrix.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    write_table(args, rows)
    plot(args, rows)


if __name__ == "__main__":
    main()
