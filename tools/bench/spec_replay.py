#!/usr/bin/env python3
"""Replay n-gram drafting rules over greedy traces, offline.

Greedy decoding writes the same text whatever is drafted, so a drafting rule
can be scored on fixed traces: at each step the rule drafts after the chosen
token, the longest prefix that matches the trace is accepted, and the step
costs what `kara bench --verify K` measures for a verify step of K drafts (in
one-token steps). Used to choose runtime/generate/ngram_draft.c's rule
(docs/SPECULATIVE.md). Works on text, one character per token: exact for a
byte-level vocabulary such as the shipped model's.

  python3 tools/bench/spec_replay.py --tasks t4.jsonl --results out.jsonl \\
      --costs 1.27,1.32,1.48,1.9,2.15,2.4,2.75,3.1 [--limit 20]

--results: `kara batch --temp 0 --kv-method full` output for --tasks' prompts.
"""
import argparse
import json

MARK_LINE_END, MARK_NONE = '\x10', '\x11'


class Streak:
    """The rule before 2026-12-04: the latest continuation of the longest
    2..4-gram, drafted once it followed that n-gram 3 times running."""

    def __init__(self):
        self.t, self.n = {}, 0

    def index(self, h, n):
        for nx in range(self.n, n):
            for g in range(2, 5):
                if g > nx:
                    break
                e = self.t.get(h[nx - g:nx])
                if e and e[0] == h[nx]:
                    e[1] += 1
                else:
                    self.t[h[nx - g:nx]] = [h[nx], 1]
        self.n = n

    def pred(self, tail):
        for g in range(4, 1, -1):
            e = self.t.get(tail[-g:]) if g <= len(tail) else None
            if e is not None:
                return e[0] if e[1] >= 3 else None
        return None

    def __call__(self, h, n, k_max):
        self.index(h, n)
        out = ''
        while len(out) < k_max:
            c = self.pred(h[max(0, n - 4):n] + out)
            if c is None:
                break
            out += c
        return out


class Contexts:
    """ngram_draft.c's rule: counts per context (n-grams of 1-12 tokens and
    three contexts aligned with the line above), two candidates each;
    draft while the product of the best probabilities >= min_prob."""

    ORDERS = (1, 2, 3, 4, 6, 8, 12)

    def __init__(self, min_prob=0.45, aligned=True, newline='\n'):
        self.min_prob, self.aligned, self.nl = min_prob, aligned, newline
        self.t, self.n = {}, 0

    def keys(self, h):
        n, ks = len(h), []
        for o in self.ORDERS:
            if o <= n:
                ks.append(('n', h[n - o:]))
        last = h.rfind(self.nl, 0, n)
        if self.aligned and last >= 0:
            col, prev = n - last - 1, h.rfind(self.nl, 0, last)
            above = h[prev + 1:last]
            a = above[col] if col < len(above) else MARK_LINE_END if col == len(above) else MARK_NONE
            b = above[col - 1] if 0 < col <= len(above) else MARK_NONE
            before = h[n - 2] if n >= 2 else MARK_NONE
            ks += [('a1', a, h[n - 1]), ('a2', a, b, h[n - 1]), ('a3', a, before, h[n - 1])]
        return ks

    def index(self, h, n):
        for nx in range(self.n, n):
            x = h[nx]
            for k in self.keys(h[:nx]):
                e = self.t.get(k)
                if e is None:
                    self.t[k] = [x, 1, None, 0, 1]
                    continue
                e[4] += 1
                if e[0] == x:
                    e[1] += 1
                elif e[2] == x:
                    e[3] += 1
                    if e[3] > e[1]:
                        e[0], e[1], e[2], e[3] = e[2], e[3], e[0], e[1]
                else:
                    e[2], e[3] = x, 1
        self.n = n

    def __call__(self, h, n, k_max):
        self.index(h, n)
        out, p_all = '', 1.0
        while len(out) < k_max:
            best, bp = None, 0.0
            for k in self.keys(h[:n] + out):
                e = self.t.get(k)
                if e and e[1] / (e[4] + 0.5) > bp:
                    bp, best = e[1] / (e[4] + 0.5), e[0]
            p_all *= bp
            if best is None or p_all < self.min_prob:
                break
            out += best
        return out


class CopyOracle:
    """An upper bound: drafts the longest continuation (>= 3 tokens) that
    occurs verbatim earlier in the text, knowing the trace."""

    def __init__(self, trace):
        self.trace = trace

    def __call__(self, h, n, k_max):
        best = 0
        for length in range(1, k_max + 1):
            if n + length > len(self.trace) or self.trace[n:n + length] not in self.trace[:n]:
                break
            best = length
        return self.trace[n:n + best] if best >= 3 else ''


def replay(make, traces, costs, k_max):
    tokens = cost = drafted = accepted = 0
    for prompt, text in traces:
        full, drafter, i = prompt + text, make(prompt + text), len(prompt)
        while i < len(full):
            draft = drafter(full, i + 1, k_max)
            acc = 0
            while acc < len(draft) and i + 1 + acc < len(full) and full[i + 1 + acc] == draft[acc]:
                acc += 1
            tokens, cost = tokens + 1 + acc, cost + costs[len(draft)]
            drafted, accepted, i = drafted + len(draft), accepted + acc, i + 1 + acc
    return tokens / cost, drafted, accepted, tokens


def load(tasks, results, limit):
    prompts = {}
    for line in open(tasks):
        d = json.loads(line)
        prompts[d['id']] = d['prompt']
    out = []
    for line in open(results):
        d = json.loads(line)
        m = d['response']['body']['choices'][0]['message']
        p = '\x01user\n' + prompts[d['custom_id']] + '\x02\n\x01assistant\n\x03\n'
        out.append((p, m.get('reasoning_content', '') + '\n\x04\n\n' + m['content'] + '\x02'))
    return out[:limit] if limit else out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--tasks', required=True)
    ap.add_argument('--results', required=True)
    ap.add_argument('--costs', required=True, help='verify cost of 1, 2, ... drafts in one-token steps')
    ap.add_argument('--limit', type=int, default=0)
    ap.add_argument('--draft-max', type=int, default=8)
    a = ap.parse_args()
    costs = [1.0] + [float(x) for x in a.costs.split(',')]
    while len(costs) <= a.draft_max:
        costs.append(costs[-1] + (costs[-1] - costs[-2]))
    traces = load(a.tasks, a.results, a.limit)
    rules = [('previous rule (streak of 3)', lambda t: Streak()),
             ('contexts, min_prob 0.45 (ngram_draft.c)', lambda t: Contexts()),
             ('contexts without the aligned ones', lambda t: Contexts(aligned=False)),
             ('contexts, min_prob 0.6', lambda t: Contexts(min_prob=0.6)),
             ('copy oracle (>= 3 tokens)', CopyOracle)]
    for name, make in rules:
        speed, drafted, accepted, tokens = replay(make, traces, costs, a.draft_max)
        print(f'{name:42s} predicted {speed:.3f}x  drafted {drafted}  accepted {accepted}  tokens {tokens}')


if __name__ == '__main__':
    main()
