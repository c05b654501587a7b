"""Why a chase answer is wrong: reads greedy transcripts of chase problems
and names, for each problem, the first thing that went wrong.

`kara eval` says how many chase problems a model answers; this says why
the others fail, which the next training step depends on: a product
computed wrong or left out of the table, a hop that fetched another node's
product (and which node's), a hop line that miscounts or misreads its own
line, or a stop at the wrong hop.

    kara batch -m MODEL.gguf -i chase-tier5.jsonl -o out.jsonl --temp 0 -n 4500
    python3 tools/train/chase_check.py --tasks chase-tier5.jsonl --results out.jsonl

--results takes `kara batch` output (the reasoning in the message's
reasoning_content) or JSONL lines of {"id", "thinking", "answer"}.
"""
import argparse
import json
import sys

import tasks_chase


def load_results(path):
    """id -> (thinking, answer) from kara batch output or plain JSONL."""
    out = {}
    for n, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"{path}:{n}: not JSON ({e})")
        if "custom_id" in r:
            msg = r["response"]["body"]["choices"][0]["message"]
            out[r["custom_id"]] = (msg.get("reasoning_content") or "", msg.get("content") or "")
        else:
            out[r["id"]] = (r.get("thinking", ""), str(r.get("answer", "")))
    return out


def diagnose(prompt, thinking, answer):
    """(verdict, detail) of one transcript: the first error found in the
    order the model wrote it (table, then hops, then the stop), or 'ok'."""
    nodes, start, hops = tasks_chase.parse_prompt(prompt)
    prod = {i: a * b for i, a, b in nodes}
    table = tasks_chase.read_table(thinking)
    for nid, _, _ in nodes:
        if nid not in table:
            return "table", f"node {nid} has no result line"
        if table[nid] != prod[nid]:
            return "table", f"node {nid} is {table[nid]:04d}, not {prod[nid]:04d}"
    owner = {v: k for k, v in prod.items()}
    cur = start
    lines = tasks_chase.HOP_LINE.findall(thinking)
    for i, (left, at, v, nxt) in enumerate(lines):
        left, at, v, nxt = int(left), int(at), int(v), int(nxt)
        if i == hops:
            return "stop", f"went on past hop {hops}"
        if left != hops - i or at != cur:
            return "hop line", f"hop {i + 1} reads 'hop{left} #{at}', wants 'hop{hops - i} #{cur}'"
        if v != prod[cur]:
            whose = f"node {owner[v]}'s" if v in owner else "no node's"
            return "fetch", f"hop {i + 1} of {hops}: #{cur} fetched {v:04d} ({whose}), wants {prod[cur]:04d}"
        if nxt != v % 100:
            return "hop line", f"hop {i + 1}: '>{nxt}' after {v:04d}"
        cur = nxt
    if len(lines) < hops:
        return "stop", f"stopped after {len(lines)} of {hops} hops"
    if answer.strip() != str(cur):
        return "answer", f"reached {cur}, answered '{answer.strip()}'"
    return "ok", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True, help="the chase problems (tasks.py JSONL)")
    ap.add_argument("--results", required=True, help="kara batch output, or {id, thinking, answer} lines")
    a = ap.parse_args()
    results = load_results(a.results)
    counts = {}
    for n, line in enumerate(open(a.tasks), 1):
        p = json.loads(line)
        if not tasks_chase.is_chase(p["prompt"]):
            sys.exit(f"{a.tasks}:{n}: {p['id']} is not a chase problem")
        if p["id"] in results:
            verdict, detail = diagnose(p["prompt"], *results[p["id"]])
        else:
            verdict, detail = "missing", "no result line"
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict != "ok":
            print(f"{p['id']}: {verdict}: {detail}")
    total = sum(counts.values())
    print(f"{total} problems: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
