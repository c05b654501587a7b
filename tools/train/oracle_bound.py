#!/usr/bin/env python3
"""Oracle bound of KV eviction at a share of full's peak memory (issue 47).

What could any eviction method reach at a share s of full KV's peak? This
tool answers with an eviction that knows the future. It first decodes each
problem greedily with full KV.

--policy belady (the default) then replays that transcript under a cache of
s x full's peak slots run by Belady's rule: a position counts as read at
step t when any layer's and head's attention from query t to it exceeds tau
in the full-KV run; when the cache is over its slots, the slot whose next
read lies furthest ahead (or never comes) goes, and never returns. One
masked forward pass over the transcript checks it: the problem counts as
kept when every generated token is still the greedy choice under the mask,
which is exactly when greedy decoding under that eviction writes the same
transcript (and, with --greedy-fallback, a masked greedy decode judges the
problems where it does not; after the first different token the schedule
is the full run's, an approximation). Each tau in --taus is one offline
policy, and "sum" and "max" two more: the held slot with the least
attention still to come goes, summed over the later queries or the largest
of them; "repair" searches: it evicts by "max", replays, pins the evicted
slots the first changed token's query read most in the full run, and tries
again (--repair-rounds). "oracle any" keeps a problem if one of these keeps it, as an
oracle may choose per problem. None of this proves optimality (with no
refetch, fewest lost reads is not what Belady's rule minimises): it is the
best of several evictions that know the future, a mark for methods that do
not.

--policy static (section 15.1's first oracle) ranks positions by how
strongly later queries read them (the largest attention probability any
query at least --distance positions later gives j, over layers and heads:
the "read later" score the retention prior is trained on, with no task
labels). It then decodes the problem again under a cache of s x full's peak slots:
the prompt, the last --window positions, and the K generated positions
with the highest read-later score (K fills the rest), so a slot outside
that set is dropped once it leaves the window and never returns, as in any
evicting cache. A position-indexed score is exact while the second run
writes what the first did; where it diverges the oracle is an
approximation (reported as `diverged`).

Memory is counted in slots: with no reservation of its own the oracle's
bytes are its slots times the row bytes, so a share of slots is a share of
bytes. `--baseline recent` adds a cache of the same slots holding the prompt
and the most recent positions only.

  /usr/bin/python3 tools/train/oracle_bound.py --model tools/train/runs/plain1/best.pt \\
      --tasks tests/data/late-tier5.jsonl --limit 40 --shares 0.2,0.3 [--taus 0.01,0.03,0.1,0.3]
  ... --policy static [--window 64] [--distance 32]
"""
import heapq
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402
import tasks  # noqa: E402


@torch.no_grad()
def decode(model, prompt_ids, max_new, keep_fn=None, distance=0):
    """Greedy decoding of one problem. keep_fn(pos) gives the visible mask
    of positions 0..pos (None: full KV). Returns the generated ids and, with
    distance > 0, every position's read-later score."""
    T = len(prompt_ids) + max_new + 1
    cache = model.new_cache(1, T)
    fut = torch.zeros(T)
    out = []
    for pos in range(T - 1):
        tok = torch.tensor(prompt_ids[pos]) if pos < len(prompt_ids) else torch.tensor(out[-1])
        vis = keep_fn(pos)[None] if keep_fn else None
        got = torch.zeros(1, pos + 1)
        logits = model.step(tok.view(1), pos, cache, vis, got)[0]
        got = got[0]
        if distance and pos >= distance:
            fut[:pos + 1 - distance] = torch.maximum(fut[:pos + 1 - distance], got[:pos + 1 - distance])
        if pos >= len(prompt_ids) - 1:
            out.append(int(logits.argmax()))
            if out[-1] == tasks.IM_END or len(out) >= max_new:
                break
    return out, fut


@torch.no_grad()
def attention_maps(model, ids):
    """Teacher-forced attention of every query to every key: (T, T) sum and
    max over layers and heads, and the mean value-row norm of each position."""
    T = len(ids)
    c = model.c
    g = c.n_heads // c.n_kv_heads
    a_sum = torch.zeros(T, T)
    a_max = torch.zeros(T, T)
    vnorm = torch.zeros(T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    x = torch.tensor(ids)[None]
    cos, sin = model.cos[:T], model.sin[:T]
    h = model.tok(x)
    for b in model.blocks:
        q, k, v = b.qkv(h, cos, sin)  # (1, H, T, d), (1, KVH, T, d)
        vnorm += v[0].norm(dim=-1).mean(0) / c.n_layers
        o = []
        for hq in range(c.n_heads):
            s = q[0, hq] @ k[0, hq // g].T / math.sqrt(c.head_dim)
            p = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
            a_sum += p
            torch.maximum(a_max, p, out=a_max)
            o.append(p @ v[0, hq // g])
        h = h + b.wo(torch.cat(o, -1)[None])
        h = b.ffn(h)
    return a_sum, a_max, vnorm


def belady_evictions(reads, slots):
    """Belady's rule over a read matrix (bool T x T, reads[t, j]: query t
    reads key j). Slot t enters at step t; whenever more than `slots` are
    held, the one whose next read comes last (never = T) leaves, the oldest
    first among equals. Returns each position's eviction step (T = kept)."""
    T = reads.shape[0]
    cols = [torch.nonzero(reads[:, j]).flatten().tolist() for j in range(T)]
    rows = [torch.nonzero(reads[t]).flatten().tolist() for t in range(T)]
    ptr = [0] * T
    nxt = [T] * T
    evict = [T] * T
    held = set()
    heap = []

    def advance(j, t):
        c, i = cols[j], ptr[j]
        while i < len(c) and c[i] < t:
            i += 1
        ptr[j] = i
        nxt[j] = c[i] if i < len(c) else T
        heapq.heappush(heap, (-nxt[j], j))

    for t in range(T):
        if t > 0:
            for j in rows[t - 1]:
                if j in held:
                    advance(j, t)  # read at t - 1: its next read is later
        held.add(t)
        while len(held) > slots:  # the newest slot is not in the heap yet
            negn, j = heapq.heappop(heap)
            if j not in held or -negn != nxt[j]:
                continue  # stale entry (read since, or already gone)
            held.discard(j)
            evict[j] = t
        advance(t, t + 1)  # its own step's read is served now
    return torch.tensor(evict)


def future_evictions(A, slots, rule, pinned=None):
    """The other offline rules: when over `slots`, the held slot with the
    least attention still to come goes, summed over the later queries
    (rule "sum") or the largest of them (rule "max"). Returns each
    position's eviction step (T = kept). A pinned slot goes only when every
    held slot is pinned."""
    T = A.shape[0]
    if rule == "sum":
        rest = A.float().sum(0)
    else:
        after = torch.flip(torch.cummax(torch.flip(A.float(), [0]), 0).values, [0])  # after[t, j] = max A[t:, j]
    held = torch.zeros(T, dtype=torch.bool)
    evict = torch.full((T,), T, dtype=torch.long)
    inf = torch.tensor(float("inf"))
    for t in range(T):
        if rule == "sum" and t > 0:
            rest -= A[t - 1].float()
        held[t] = True
        if int(held.sum()) > slots:
            score = rest if rule == "sum" else after[t]
            cand = torch.where(held & ~pinned, score, inf) if pinned is not None else torch.where(held, score, inf)
            cand[t] = inf
            if pinned is not None and bool(torch.isinf(cand).all()):
                cand = torch.where(held, score, inf)  # every held slot pinned: the rule decides among them
                cand[t] = inf
            j = int(cand.argmin())
            held[j] = False
            evict[j] = t
    return evict


def replay_kept(model, ids, ref, P, evict):
    """Masked forward over prompt + transcript, query t seeing only the
    slots held at t. Returns the query row of the first generated token that
    is no longer the greedy choice (None: every one still is) and the mask."""
    T = len(ids)
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = (j <= t) & (t < evict[None, :])
    logits = model.forward(torch.tensor(ids)[None], allowed=allowed[None])[0]
    wrong = (logits[P - 1:].argmax(-1) != torch.tensor(ref[:T - P + 1])).nonzero()
    return (P - 1 + int(wrong[0]) if len(wrong) else None), allowed


def repair_evictions(model, ids, ref, P, A, slots, rounds, pin_per_round=16):
    """The strongest oracle here, a search: evict by the "max" rule, replay,
    and at the first query whose greedy token changed pin the evicted slots
    it attended to most in the full run (never evicted again), then evict
    anew; up to `rounds` times. Returns (evictions, first wrong query or None)."""
    T = len(ids)
    pinned = torch.zeros(T, dtype=torch.bool)
    for _ in range(rounds):
        evict = future_evictions(A, slots, "max", pinned)
        q, _ = replay_kept(model, ids, ref, P, evict)
        if q is None:
            break
        gone = (evict <= q) & (torch.arange(T) <= q) & ~pinned
        if not bool(gone.any()):
            break
        w = torch.where(gone, A[q].float(), torch.tensor(-1.0))
        pinned[torch.topk(w, min(pin_per_round, int(gone.sum()))).indices] = True
    return evict, q


def answer_of(ids):
    text = tasks.decode_ids(ids)
    return text.split("</think>")[-1].replace("<|im_end|>", "").strip() if "</think>" in text else ""


def generation_cap(model, problem, P):
    """Tokens one greedy decode may write: twice the reference thinking, as
    kara eval caps it, and never past the model's context (its RoPE table
    ends there)."""
    return min(2 * problem["think_tokens"] + 64, model.c.context_length - P - 1)


def emit(row, path):
    """Print one result row as JSON and append it to path (if given)."""
    print(json.dumps(row), flush=True)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def static_rows(a, model, p, pids, ref, fut, rows, shares):
    """Section 15.1's oracle: the prompt, the newest --window positions and
    the best "read later" positions, decoded again under each share."""
    P = len(pids)
    max_new = generation_cap(model, p, P)
    peak = P + len(ref) - 1  # full's most slots held (its last token is never cached)
    for s in shares:
        budget = int(math.floor(s * peak))
        for pol in [k[1] for k in rows if k[0] == s]:
            r = rows[(s, pol)]
            r["n"] += 1
            w = a.window if pol == "oracle" else budget - P
            k = budget - P - w if pol == "oracle" else 0
            if w < 1 or k < 0:
                r["refused"] += 1  # the share cannot hold the prompt and the window
                continue
            keep = torch.zeros(P + max_new + 1, dtype=torch.bool)
            keep[:P] = True
            if k > 0:
                gen = fut[P:peak].clone()
                top = torch.topk(gen, min(k, gen.numel())).indices + P
                keep[top] = True

            def keep_fn(pos, keep=keep, w=w):
                j = torch.arange(pos + 1)
                return keep[:pos + 1] | (pos - j < w)
            out, _ = decode(model, pids, max_new, keep_fn)
            r["correct"] += answer_of(out) == p["answer"]
            r["diverged"] += out != ref


def belady_rows(a, model, p, pids, ref, rows, shares, taus):
    """Belady's rule at every tau, and the newest slots only, each judged
    by one masked replay of the full-KV transcript (see the module text)."""
    P = len(pids)
    ids = pids + ref[:-1]  # the last token is never cached
    T = len(ids)
    A = attention_maps(model, ids)[1].half()  # the largest read of each key by each query
    reads = {tau: A > tau for tau in taus}
    max_new = generation_cap(model, p, P)
    for s in shares:
        slots = int(math.floor(s * T))
        kept_any = False
        for tau in taus + ["sum", "max", "repair", "recent"]:
            r = rows[(s, tau if tau in ("sum", "max", "repair", "recent") else f"belady tau={tau}")]
            r["n"] += 1
            if tau == "recent":
                if slots <= P:
                    r["refused"] += 1  # the share cannot hold the prompt and one more
                    continue
                pos = torch.arange(T)
                evict = torch.where(pos < P, torch.full_like(pos, T), pos + slots - P)
            elif tau in ("sum", "max"):
                evict = future_evictions(A, slots, tau)
            elif tau == "repair":
                evict, _ = repair_evictions(model, ids, ref, P, A, slots, a.repair_rounds)
            else:
                evict = belady_evictions(reads[tau], slots)
            first_wrong, allowed = replay_kept(model, ids, ref, P, evict)
            same = first_wrong is None
            ok = same and answer_of(ref) == p["answer"]
            if not same:
                r["diverged"] += 1
                if a.greedy_fallback:
                    def keep_fn(pos, allowed=allowed):
                        if pos < T:
                            return allowed[pos, :pos + 1]
                        j = torch.arange(pos + 1)
                        return pos - j < slots
                    out, _ = decode(model, pids, max_new, keep_fn)
                    ok = answer_of(out) == p["answer"]
            r["correct"] += ok
            if tau != "recent":
                kept_any |= ok
        r = rows[(s, "oracle any")]
        r["n"] += 1
        r["correct"] += kept_any


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a checkpoint (ckpt.pt / best.pt) of train.py")
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--shares", default="0.2,0.3", help="shares of full's peak slots (= bytes)")
    ap.add_argument("--policy", choices=["belady", "static"], default="belady")
    ap.add_argument("--taus", default="0.01,0.03,0.1,0.3", help="belady: attention above tau is a read")
    ap.add_argument("--greedy-fallback", action="store_true",
                    help="belady: decode greedily under the mask where the replay differs")
    ap.add_argument("--repair-rounds", type=int, default=12, help="belady: rounds of the repair search")
    ap.add_argument("--window", type=int, default=64, help="static: recent positions always kept")
    ap.add_argument("--distance", type=int, default=32, help="static: a read counts when the query is this far later")
    ap.add_argument("--baseline", choices=["none", "recent"], default="recent", help="static only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="", help="append one JSON line per (share, policy)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    probs = evaluate.read_jsonl(a.tasks)[:a.limit or None]
    shares = [float(x) for x in a.shares.split(",")]
    taus = [float(x) for x in a.taus.split(",")]
    if a.policy == "belady":
        pols = [f"belady tau={t}" for t in taus] + ["sum", "max", "repair", "oracle any", "recent"]
    else:
        pols = ["oracle"] + (["recent"] if a.baseline == "recent" else [])
    rows = {(s, pol): {"correct": 0, "n": 0, "refused": 0, "diverged": 0} for s in shares for pol in pols}
    full_ok = 0
    t0 = time.time()
    for p in probs:
        pids = tasks.generation_prompt_ids(p["prompt"])
        ref, fut = decode(model, pids, generation_cap(model, p, len(pids)), None,
                          a.distance if a.policy == "static" else 0)
        full_ok += answer_of(ref) == p["answer"]
        if a.policy == "static":
            static_rows(a, model, p, pids, ref, fut, rows, shares)
        else:
            belady_rows(a, model, p, pids, ref, rows, shares, taus)
    n = len(probs)
    print(f"{os.path.basename(a.tasks)}: {n} problems, full KV {full_ok}/{n} ({time.time() - t0:.0f}s)", flush=True)
    for (s, pol), r in sorted(rows.items()):
        row = {"tasks": os.path.basename(a.tasks), "share": s, "policy": pol,
               "window": a.window if pol == "oracle" else None,
               "distance": a.distance if a.policy == "static" else None, "n": r["n"], "correct": r["correct"],
               "accuracy": round(r["correct"] / max(r["n"], 1), 4), "refused": r["refused"],
               "diverged": None if pol == "oracle any" else r["diverged"],
               "full_correct": full_ok}
        emit(row, a.json)


if __name__ == "__main__":
    main()
