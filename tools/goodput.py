#!/usr/bin/env python3
"""Goodput of batch jobs: correct answers per CPU-second under a fixed KV byte budget.

For every task file, budget and KV method, runs `kara batch` on the problems at each concurrency
of --concurrency (admission may lower it to what the budget holds: the stats say how many ran at
once), counts the answers that equal the task file's `answer`, and divides by the CPU seconds the
job used (`cpu_seconds` of --stats-json: every thread, user and system). The best concurrency of
each method is the one with the highest goodput. Greedy decoding, one thread per job by default,
so a figure does not depend on how busy the other core is.

  tools/goodput.py --kara build/bin/kara -m tools/train/model/kara-reasoner-1m.gguf \\
      --tasks tests/data/reuse-tier4.jsonl --budgets 2MiB,8MiB --out goodput.csv

Writes a CSV (one row per task file, budget, method and concurrency, the best flagged) and prints
the best row of each method with its ratio to full's best.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

METHODS = "full,kara,kara/per_window,snapkv,streaming,h2o,chunkkv,recent,random,rkv,lazy"


def answer_of(line):
    """The final answer text of one batch output line (None for an error line)."""
    rec = json.loads(line)
    body = (rec.get("response") or {}).get("body") or {}
    choices = body.get("choices") or []
    if not choices:
        return rec.get("custom_id"), None
    return rec.get("custom_id"), (choices[0].get("message") or {}).get("content", "").strip()


def same_answer(got, want):
    """As `kara eval` compares: numbers by value, anything else as text."""
    try:
        return float(got) == float(want)
    except ValueError:
        return got == want


def run_job(args, tasks, method, budget, j, tmp):
    inp = os.path.join(tmp, "in.jsonl")
    out = os.path.join(tmp, "out.jsonl")
    stats = os.path.join(tmp, "stats.json")
    with open(inp, "w") as f:
        for t in tasks:
            f.write(json.dumps({"id": t["id"], "prompt": t["prompt"]}) + "\n")
    name, _, evict = method.partition("/")
    cmd = [args.kara, "batch", "-m", args.model, "-i", inp, "-o", out, "--no-resume", "--no-progress",
           "--stats-json", stats, "-t", str(args.threads), "--temp", "0", "-j", str(j),
           "--kv-budget", budget, "--kv-method", name]
    if evict:
        cmd += ["--kv-evict", evict]
    if args.cap_factor > 0:
        cap = max(int(t.get("think_tokens", 0)) for t in tasks) * args.cap_factor + 64
        cmd += ["-n", str(cap)]
    cmd += args.extra
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1) or not os.path.exists(stats):
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    st = json.load(open(stats))
    want = {t["id"]: str(t["answer"]) for t in tasks}
    correct = 0
    with open(out) as f:
        for line in f:
            cid, ans = answer_of(line)
            correct += ans is not None and cid in want and same_answer(ans, want[cid])
    cpu = st.get("cpu_seconds", 0.0)
    return {"correct": correct, "n": len(tasks), "cpu_seconds": cpu, "wall_seconds": st.get("seconds", 0.0),
            "peak_running": st.get("peak_running", 0), "kv_bytes_peak": st.get("kv_bytes_peak", 0),
            "kv_reserved_bytes": st.get("kv_reserved_bytes", 0), "evicted": st.get("kv_slots_evicted", 0),
            "preemptions": st.get("preemptions", 0), "failed": st.get("failed", 0),
            "goodput": correct / cpu if cpu > 0 else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kara", default="build/bin/kara")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tasks", action="append", required=True, help="task JSONL (repeatable)")
    ap.add_argument("--budgets", default="2MiB,8MiB")
    ap.add_argument("--methods", default=METHODS, help="comma-separated; NAME/per_window for the eager mode")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cap-factor", type=int, default=2, help="token cap: this times the longest think_tokens + 64")
    ap.add_argument("--out", default="")
    ap.add_argument("extra", nargs="*", help="more kara batch options after --")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.tasks:
            tasks = [json.loads(l) for l in open(path) if l.strip()]
            if args.limit:
                tasks = tasks[: args.limit]
            for budget in args.budgets.split(","):
                best_full = None
                for method in args.methods.split(","):
                    best = None
                    for j in [int(x) for x in args.concurrency.split(",")]:
                        r = run_job(args, tasks, method, budget, j, tmp)
                        row = {"tasks": os.path.basename(path), "budget": budget, "method": method, "j": j, **r}
                        rows.append(row)
                        if "error" in r:
                            print(f"{row['tasks']} {budget} {method} -j {j}: {r['error']}", file=sys.stderr)
                            continue
                        if best is None or r["goodput"] > best["goodput"]:
                            best = row
                    if best is None:
                        print(f"{os.path.basename(path)} {budget} {method}: could not run", flush=True)
                        continue
                    best["best"] = 1
                    if method == "full":
                        best_full = best
                    ratio = best["goodput"] / best_full["goodput"] if best_full and best_full["goodput"] else 0
                    print(f"{best['tasks']} {budget:>6} {method:<16} -j {best['j']:>2} ran {best['peak_running']:>2}"
                          f" correct {best['correct']:>3}/{best['n']} cpu {best['cpu_seconds']:7.2f}s"
                          f" goodput {best['goodput']:8.2f}/s  x{ratio:.2f} of full", flush=True)
    if args.out:
        keys = ["tasks", "budget", "method", "j", "best", "correct", "n", "cpu_seconds", "wall_seconds",
                "goodput", "peak_running", "kv_bytes_peak", "kv_reserved_bytes", "evicted", "preemptions",
                "failed", "error"]
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow(r)


if __name__ == "__main__":
    main()
