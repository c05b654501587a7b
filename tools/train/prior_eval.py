#!/usr/bin/env python3
"""KL of Kara with and without its retention prior against the budget baselines at equal peak bytes.

  python3 tools/train/prior_eval.py --model M-prior.gguf --config configs/eval-kv-stories260k.yaml \\
      --text A.txt [--text B.txt ...] [--retention 0.2] [--weights 0,1,16] [--methods streaming,snapkv] \\
      [--out results.csv] [--kara build/bin/kara]

For each text, `kara eval-kv` runs Kara at the retention once per prior
weight (`--kv-prior-weight W`, weight 0 being training-free Kara). Kara's
peak KV bytes (`peak_kv_bytes`: blocks in use plus query rings and scoring
scratch) at the first weight is the cap. Every baseline then gets the
largest token budget (`--kv-budget-tokens`) whose own peak bytes stay at or
under that cap, found by bisection (a baseline's peak grows with its budget),
so no method holds more memory than Kara did. A baseline whose peak is over
the cap even at --min-budget is shown at that budget as "(over cap)". eval-kv's `--kv-budget` cannot
do this: it caps the full reference too. Prints one table row per text and
method, with KL against full, top-1 agreement and the peak as a share of
full's; --out also writes them as CSV. Needs only the standard library.
"""
import argparse
import csv
import os
import subprocess
import tempfile


def eval_kv(kara, model, config, text, extra):
    """Rows of one `kara eval-kv` run (its CSV), by label."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.csv")
        cmd = [kara, "eval-kv", "-m", model, "-f", text, "--needle-depths", "none", "--out", out]
        if config:
            cmd += ["--config", config]
        r = subprocess.run(cmd + extra, capture_output=True, text=True)
        if r.returncode != 0:
            err = r.stderr.strip().splitlines()
            raise SystemExit(f"{' '.join(cmd + extra)}: exit {r.returncode}: {err[-1] if err else ''}")
        with open(out, encoding="utf-8") as f:
            return {row["label"]: row for row in csv.DictReader(f)}


def matched(kara, model, config, text, method, retention, cap, lo, hi):
    """The row of `method` at the largest token budget in [lo, hi] whose peak bytes <= cap.
    Below a few tokens a baseline may not evict at all, so the search starts at lo."""
    def run(b):
        return eval_kv(kara, model, config, text, ["--retention", str(retention), "--methods", method,
                                                   "--kv-budget-tokens", str(b)])[method]
    lo_row = run(lo)
    if int(lo_row["slots_evicted"]) == 0 or int(lo_row["peak_kv_bytes"]) > cap:
        return lo_row, False
    best = lo_row
    while lo < hi:  # invariant: budget lo fits the cap; hi may not
        mid = (lo + hi + 1) // 2
        row = run(mid)
        if int(row["peak_kv_bytes"]) <= cap:
            lo, best = mid, row
        else:
            hi = mid - 1
    return best, True


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a GGUF with a retention prior")
    ap.add_argument("--config", help="eval-kv configuration (e.g. configs/eval-kv-stories260k.yaml)")
    ap.add_argument("--text", action="append", required=True, help="a held-out text (repeatable)")
    ap.add_argument("--retention", type=float, default=0.2)
    ap.add_argument("--weights", default="0,1,16", help="prior weights of the Kara rows; the first sets the cap")
    ap.add_argument("--methods", default="streaming,snapkv", help="baselines matched to Kara's peak bytes")
    ap.add_argument("--min-budget", type=int, default=32, help="smallest token budget the search tries (below a "
                    "few dozen snapkv may evict nothing)")
    ap.add_argument("--max-budget", type=int, default=512, help="largest token budget the search tries")
    ap.add_argument("--kara", default=os.path.join(here, "..", "..", "build", "bin", "kara"))
    ap.add_argument("--out", help="CSV of the rows")
    a = ap.parse_args(argv)
    weights = [w.strip() for w in a.weights.split(",") if w.strip()]
    rows = []
    for text in a.text:
        name = os.path.basename(text)
        full = None
        cap = None
        for w in weights:
            res = eval_kv(a.kara, a.model, a.config, text, ["--retention", str(a.retention), "--methods", "kara",
                                                             "--kv-prior-weight", w])
            full = int(res["full"]["peak_kv_bytes"])
            k = res["kara"]
            if cap is None:
                cap = int(k["peak_kv_bytes"])
            rows.append((name, f"kara prior {w}", "-", k, full))
        for m in a.methods.split(","):
            row, fits = matched(a.kara, a.model, a.config, text, m, a.retention, cap, a.min_budget, a.max_budget)
            rows.append((name, m if fits else f"{m} (over cap)", row["budget_tokens"], row, full))
    print(f"{'text':28s} {'method':16s} {'budget':>6s} {'slots':>6s} {'peak_KiB':>8s} {'peak_sh':>7s} "
          f"{'KL_mean':>8s} {'top1':>6s}")
    for name, label, budget, r, full in rows:
        peak = int(r["peak_kv_bytes"])
        print(f"{name:28s} {label:16s} {budget:>6s} {float(r['mean_slots']):6.1f} {peak / 1024:8.1f} "
              f"{peak / full:7.3f} {float(r['kl_mean']):8.4f} {float(r['top1_agree']):6.3f}")
    if a.out:
        with open(a.out, "w", encoding="utf-8", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["text", "method", "retention", "budget_tokens", "mean_slots", "peak_kv_bytes",
                         "full_peak_kv_bytes", "peak_share", "kl_mean", "kl_mean_compressed", "top1_agree",
                         "ppl_ratio"])
            for name, label, budget, r, full in rows:
                peak = int(r["peak_kv_bytes"])
                wr.writerow([name, label, a.retention, budget, r["mean_slots"], peak, full, f"{peak / full:.4f}",
                             r["kl_mean"], r["kl_mean_compressed"], r["top1_agree"], r["ppl_ratio"]])


if __name__ == "__main__":
    main()
