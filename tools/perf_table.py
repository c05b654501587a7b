#!/usr/bin/env python3
"""Side-by-side table from the JSON lines of `kara bench` and
../shared/bench/llamacpp-ref (mixed in one file, as tools in docs/PERFORMANCE.md
write them): one row per (model, test, threads, depth) with both medians and
the ratio kara / llama.cpp. When a configuration was run several times, the
median of the per-run medians is used.

    python3 tools/perf_table.py results.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    runs = defaultdict(list)
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        o = json.loads(line)
        if "tok_s_median" not in o:
            continue
        key = (o["model"], o["test"], o["threads"], o["depth"])
        runs[key + (o["engine"],)].append(o["tok_s_median"])
    keys = sorted({k[:4] for k in runs}, key=lambda k: (k[0], k[3], k[1], k[2]))
    print("| model | test | threads | depth | llama.cpp tok/s | kara tok/s | kara / llama.cpp |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k in keys:
        ref = runs.get(k + ("llama.cpp",))
        ours = runs.get(k + ("kara",))
        r = statistics.median(ref) if ref else None
        o = statistics.median(ours) if ours else None
        ratio = f"{o / r:.2f}x" if r and o else "-"
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"
        print(f"| {k[0].replace('.gguf', '')} | {k[1]} | {k[2]} | {k[3]} | {fmt(r)} | {fmt(o)} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin")
