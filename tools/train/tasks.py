#!/usr/bin/env python3
"""Synthetic chain-of-thought tasks for Kara's small reasoning model.

A problem is a sum of N products of two-digit numbers, e.g.
"Compute 47*83 + 26*59." The worked solution (the thinking) first computes
every product digit by digit, then forms a running sum that must fetch each
product's result from far back in the thinking:

    #1 47*83                      <- block header (scratch)
    47*3 7*3+0=21 4*3+2=14 141    <- partial product (scratch)
    47*8 7*8+0=56 4*8+5=37 376    <- partial product (scratch)
    0141+3760 1+0+0=01 ... 3901   <- column addition (scratch)
    p1:47*83=3901                 <- product result line (INFORMATIVE)
    ...
    s1=03901                      <- running sum starts
    s1+p2 03901+01534 1+4+0=05 ... 05435   <- column addition fetching p2
    s2=05435
    ...

Every number has a fixed width and every column step writes a two-digit
result, so the format is regular and the thinking length depends only on N.
Product result lines are the only thinking tokens needed after their block
ends (apart from the running sum just written); everything else is scratch
that is never read again. That is what makes the set a yardstick for KV
eviction: keeping the product lines plus a recent window must suffice, while
a recent-only window of the same size loses the early products.

That is the "late" family: each product is re-read once, at the very end.
The "reuse" family ("Sum #1 24*88 + #2 78*5 + #3 41*37.") re-reads each
result soon after writing it AND much later, with step lengths that vary at
random (the second operand has 1 or 2 digits, so a block has one or two
partial lines and a column addition or none). It uses only the late family's
line shapes:

    #2 78*5                       <- block header (scratch)
    78*5 8*5+0=40 7*5+4=39 390    <- one partial line per digit of b (scratch)
    p2=0390                       <- product result line (INFORMATIVE)
    s1+p2=0390                    <- near reuse: running sum fetches p2 (scratch)
    02112+00390 ... 02502         <- 5-wide column addition (scratch)
    s2=02502                      <- running sum result line (INFORMATIVE)
    ...
    c1=p3=1258                    <- far reuse: a check pass in reverse order
    c1=01258                         fetches every product again and must
    c1+p2=0390                       reach the same total (scratch)
    ...

Token ids: one token per byte (id = byte value), then the specials below.

The "chase" family (tasks_chase.py) has another shape: pointer chasing
through a table of products the thinking wrote, read back in an order only
the data decides, from result lines of three formats; the answer is a node id.

Tier 5 of every family is the long tier: over 3,000 thinking tokens, for a
model whose context is 8,192 (the plain model, train.py --context 8192).

  tasks.py --family {late,reuse,chase} --tier T --n N --seed S [--out FILE]   one held-out set (JSONL)
  tasks.py --all [--seed 1234] [--dir tests/data]                       every shipped set
  tasks.py --show N [--family reuse]                                    one worked example
"""
import argparse
import json
import os
import random
import sys

import tasks_chase as chase
import tasks_recall as recall

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
ENDOFTEXT, IM_START, IM_END, THINK, END_THINK = range(256, 256 + len(SPECIALS))
VOCAB_SIZE = 256 + len(SPECIALS)

FAMILIES = ("late", "reuse", "chase")
# Tiers by number of products; the late family's thinking length follows from
# N exactly, the reuse family's varies with the operands.
# Tier 5 is the long tier (over 3,000 thinking tokens; sums stay below
# 100,000, so every running sum fits its 5 digits).
TIERS = {1: 2, 2: 3, 3: 4, 4: 6, 5: 16}
REUSE_TIERS = {1: 2, 2: 3, 3: 4, 4: 6, 5: 14}
FAMILY_TIERS = {"late": TIERS, "reuse": REUSE_TIERS, "chase": chase.TIERS}
# Training mix: number of products -> relative weight (tokens per batch are
# kept constant, so the weight is the share of training tokens).
TRAIN_MIX = {1: 0.5, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.5, 6: 2.0, 7: 1.0}
REUSE_TRAIN_MIX = {1: 0.5, 2: 1.0, 3: 1.0, 4: 1.5, 5: 1.5, 6: 2.0}
FAMILY_MIX = {"late": TRAIN_MIX, "reuse": REUSE_TRAIN_MIX, "chase": chase.TRAIN_MIX}
# The plain model's mix reaches the long tier (tier 5) of every family.
LONG_MIX = {"late": {1: 0.5, 2: 1.0, 3: 1.0, 4: 1.0, 6: 1.5, 8: 1.0, 11: 1.0, 14: 0.7, 17: 0.5, 19: 0.3},
            "reuse": {1: 0.5, 2: 1.0, 3: 1.0, 4: 1.0, 6: 1.5, 8: 1.0, 10: 1.0, 12: 0.7, 15: 0.5, 17: 0.3},
            "chase": chase.LONG_MIX}

# Every size from the long mix's smallest to its largest, each with the same
# share of tokens (the smallest half of it). The long mix skips sizes, the
# long tier's among them (16 products, 14, 24 nodes): a model trained on it
# learns where to stop from the sizes it saw rather than from the prompt, and
# at tier 5 writes a 17th product or a 29th hop.
DENSE_MIX = {f: {n: (0.5 if n == min(m) else 1.0) for n in range(min(m), max(m) + 1)} for f, m in LONG_MIX.items()}


def tier_size(fam, tier):
    """The size a training mix counts for a tier: products, or chase's nodes."""
    t = FAMILY_TIERS[fam][tier]
    return t[0] if isinstance(t, tuple) else t


def boost_long(mix, factor):
    """The mix with the weight of every size past tier 4's multiplied by factor:
    once tiers 1-4 are learned, the tokens go where the long tier is still
    being learned, and tiers 1-4 stay in the mix so they are not forgotten."""
    return {f: {n: w * factor if n > tier_size(f, 4) else w for n, w in sizes.items()} for f, sizes in mix.items()}


CONTEXT = 2048  # the first model's context: longer training transcripts are redrawn

# Span kinds of the thinking tokens (used by the training-time masking and the
# oracle evaluation).
KIND_PROMPT, KIND_INFO, KIND_SCRATCH, KIND_ANSWER = 0, 1, 2, 3


def encode_text(s):
    return list(s.encode("utf-8"))


def decode_ids(ids):
    out = bytearray()
    parts = []
    for t in ids:
        if t < 256:
            out.append(t)
        else:
            parts.append(out.decode("utf-8", "replace"))
            out = bytearray()
            parts.append(SPECIALS[t - 256])
    parts.append(out.decode("utf-8", "replace"))
    return "".join(parts)


def make_problem(rng, n_terms, family="late", hops_spread=chase.HOPS_SPREAD, hops_free=False):
    """A problem of n_terms: products (late, reuse) or nodes (chase; hops
    from n_terms - 1 to n_terms + hops_spread, or from 1 with hops_free).
    Sums of 11 or more products are redrawn until they fit 5 digits (never
    needed below that, so the shipped sets are unchanged)."""
    if family == "chase":
        return chase.make_problem(rng, n_terms, chase.hops_for(rng, n_terms, hops_spread, hops_free))
    while True:
        if family == "late":
            terms = [(rng.randint(10, 99), rng.randint(10, 99)) for _ in range(n_terms)]
        else:
            terms = []
            for _ in range(n_terms):
                a = rng.randint(10, 99)
                b = rng.randint(2, 9) if rng.random() < 0.5 else rng.randint(10, 99)
                terms.append((a, b))
        if sum(a * b for a, b in terms) < 100000:
            return terms


# Format 2 (the shipped one) labels the terms in the prompt ("#1 24*88") and
# writes product results as "p1=2112", so both long-range reads (the block
# header from the prompt, the product value from its result line) are plain
# label-then-copy lookups. Format 1 (unlabelled prompt, "p1:24*88=2112",
# sum lines fetching the value inline) is kept for the first training stage.
FORMAT = 2


VERBS = {"late": "Compute", "reuse": "Sum", "chase": "Chase"}


def prompt_text(terms, fmt=FORMAT, family="late"):
    if family == "chase":
        return chase.prompt_text(terms)
    if fmt == 1:
        return "Compute " + " + ".join(f"{a}*{b}" for a, b in terms) + "."
    return VERBS[family] + " " + " + ".join(f"#{k} {a}*{b}" for k, (a, b) in enumerate(terms, 1)) + "."


def prompt_format(prompt):
    return 2 if "#" in prompt else 1


def prompt_family(prompt):
    if chase.is_chase(prompt):
        return "chase"
    return "reuse" if prompt.startswith(VERBS["reuse"] + " ") else "late"


def parse_prompt(prompt):
    """Terms [(a, b), ...] of a prompt in either format and family (a chase
    prompt gives (nodes, start, hops))."""
    if chase.is_chase(prompt):
        return chase.parse_prompt(prompt)
    body = prompt[prompt.index(" ") + 1:-1]
    return [tuple(int(x) for x in t.split(" ")[-1].split("*")) for t in body.split(" + ")]


def example_for_prompt(prompt):
    """build_example for a held-out prompt of either family."""
    return build_example(parse_prompt(prompt), prompt_format(prompt), prompt_family(prompt))


def _mul_by_digit(a, d):
    """a (two digits) times one digit, written right to left with carries."""
    a1, a0 = divmod(a, 10)
    x = a0 * d
    y = a1 * d + x // 10
    steps = f"{a0}*{d}+0={x:02d} {a1}*{d}+{x // 10}={y:02d}"
    return steps, a * d  # a*d < 1000, written as 3 digits


def _column_add(x, y, width):
    """Fixed-width column addition, right to left, each column 'a+b+c=XY'."""
    xs, ys = f"{x:0{width}d}", f"{y:0{width}d}"
    carry = 0
    cols = []
    for i in range(width - 1, -1, -1):
        s = int(xs[i]) + int(ys[i]) + carry
        cols.append(f"{xs[i]}+{ys[i]}+{carry}={s:02d}")
        carry = s // 10
    assert carry == 0
    return f"{xs}+{ys} " + " ".join(cols) + f" {x + y:0{width}d}"


def product_block(label, a, b):
    """The scratch lines of a two-digit product's block: its header, a
    partial line per digit of b (right to left) and their 4-wide column
    addition. The late and chase families share it."""
    b1, b0 = divmod(b, 10)
    s0, p0 = _mul_by_digit(a, b0)
    s1, p1 = _mul_by_digit(a, b1)
    return [f"#{label} {a}*{b}", f"{a}*{b0} {s0} {p0:03d}", f"{a}*{b1} {s1} {p1:03d}",
            _column_add(p0, p1 * 10, 4)]


def solution_lines(terms, fmt=FORMAT):
    """The thinking as a list of (line, kind, step) without newlines."""
    lines = []
    step = 0
    for k, (a, b) in enumerate(terms, 1):
        lines.extend((line, KIND_SCRATCH, step) for line in product_block(k, a, b))
        if fmt == 1:
            lines.append((f"p{k}:{a}*{b}={a * b:04d}", KIND_INFO, step))
        else:
            lines.append((f"p{k}={a * b:04d}", KIND_INFO, step))
        step += 1
    total = terms[0][0] * terms[0][1]
    if fmt != 1:
        lines.append((f"s1=p1={total:04d}", KIND_SCRATCH, step))
    lines.append((f"s1={total:05d}", KIND_SCRATCH, step))
    step += 1
    for k in range(2, len(terms) + 1):
        p = terms[k - 1][0] * terms[k - 1][1]
        if fmt == 1:
            lines.append((f"s{k - 1}+p{k} " + _column_add(total, p, 5), KIND_SCRATCH, step))
        else:
            lines.append((f"s{k - 1}+p{k}={p:04d}", KIND_SCRATCH, step))
            lines.append((_column_add(total, p, 5), KIND_SCRATCH, step))
        total += p
        lines.append((f"s{k}={total:05d}", KIND_SCRATCH, step))
        step += 1
    return lines, total


def reuse_solution_lines(terms):
    """The reuse family's thinking as a list of (line, kind, step). Per term:
    the late family's block (header, one partial line per digit of b, right to
    left, a 4-wide column addition when b has two digits, then pK=), and right
    after it the running-sum step that re-reads pK (near reuse). At the end a
    check pass re-reads every pK again in reverse order (far reuse), so its
    partial sums differ from the running sum's and must reach the
    same total. Every step uses only the late family's line shapes, so the
    model learns where results are read, not new arithmetic. The p, s and c
    result lines are informative; everything else is scratch of its step."""
    lines = []
    step = 0
    prods = []
    total = 0
    for k, (a, b) in enumerate(terms, 1):
        lines.append((f"#{k} {a}*{b}", KIND_SCRATCH, step))
        digits = [int(c) for c in reversed(str(b))]
        parts = []
        for d in digits:
            st, p = _mul_by_digit(a, d)
            lines.append((f"{a}*{d} {st} {p:03d}", KIND_SCRATCH, step))
            parts.append(p)
        if len(parts) == 2:
            lines.append((_column_add(parts[0], parts[1] * 10, 4), KIND_SCRATCH, step))
        prods.append(a * b)
        lines.append((f"p{k}={a * b:04d}", KIND_INFO, step))
        step += 1
        if k == 1:
            lines.append((f"s1=p1={a * b:04d}", KIND_SCRATCH, step))
        else:
            lines.append((f"s{k - 1}+p{k}={a * b:04d}", KIND_SCRATCH, step))
            lines.append((_column_add(total, a * b, 5), KIND_SCRATCH, step))
        total += a * b
        lines.append((f"s{k}={total:05d}", KIND_INFO, step))
        step += 1
    n = len(terms)
    check = prods[n - 1]
    lines.append((f"c1=p{n}={check:04d}", KIND_SCRATCH, step))
    lines.append((f"c1={check:05d}", KIND_SCRATCH, step))
    step += 1
    for j in range(2, n + 1):
        p = prods[n - j]
        lines.append((f"c{j - 1}+p{n - j + 1}={p:04d}", KIND_SCRATCH, step))
        lines.append((_column_add(check, p, 5), KIND_SCRATCH, step))
        check += p
        lines.append((f"c{j}={check:05d}", KIND_SCRATCH, step))
        step += 1
    assert check == total
    return lines, total


def build_example(terms, fmt=FORMAT, family="late"):
    """Token ids plus per-token annotations for one full chat transcript.

    Returns dict with ids, kind (per token), step_end (position of the last
    token of the step a scratch token belongs to; -1 otherwise), loss_start
    (first position whose next-token prediction is trained), think_len.
    """
    ids, kind, step_of = [], [], []

    def add(toks, k, st=-1):
        ids.extend(toks)
        kind.extend([k] * len(toks))
        step_of.extend([st] * len(toks))

    add([IM_START], KIND_PROMPT)
    add(encode_text("user\n" + prompt_text(terms, fmt, family)), KIND_PROMPT)
    add([IM_END], KIND_PROMPT)
    add(encode_text("\n"), KIND_PROMPT)
    add([IM_START], KIND_PROMPT)
    add(encode_text("assistant\n"), KIND_PROMPT)
    add([THINK], KIND_PROMPT)
    prompt_len = len(ids)
    add(encode_text("\n"), KIND_SCRATCH, 0)
    if family == "chase":
        lines, total = chase.solution_lines(terms, product_block)
    elif family == "late":
        lines, total = solution_lines(terms, fmt)
    else:
        lines, total = reuse_solution_lines(terms)
    for line, k, st in lines:
        add(encode_text(line + "\n"), k, st)
    add([END_THINK], KIND_ANSWER)
    think_len = len(ids) - prompt_len
    add(encode_text("\n\n" + str(total)), KIND_ANSWER)
    add([IM_END], KIND_ANSWER)
    # Long-range reads: the operands a block header copies from the prompt
    # and the product values the sum (and check) lines fetch by label. They
    # are few per problem, so train.py can up-weight their loss
    # (--copy-weight). fetch marks the second kind alone.
    copy = [0] * len(ids)
    fetch = [0] * len(ids)
    pos = prompt_len + 1
    for line, _, _ in lines:
        n = len(line)
        is_fetch = line[0] in "sc" and "p" in line
        if family == "chase":
            first, is_fetch = chase.fetch_spans(line)
        elif line.startswith("#"):
            first = line.index(" ") + 1
        elif is_fetch:
            first = line.rindex("=") + 1
        else:
            first = n
        for c in range(first, n):
            copy[pos + c] = 1
            fetch[pos + c] = int(is_fetch)
        pos += n + 1
    step_end = {}
    for pos, st in enumerate(step_of):
        if st >= 0:
            step_end[st] = pos
    se = [step_end[st] if st >= 0 else -1 for st in step_of]
    return {
        "ids": ids,
        "kind": kind,
        "step_end": se,
        "copy": copy,
        "fetch": fetch,
        "prompt_len": prompt_len,
        "think_len": think_len,
        "answer": str(total),
        "family": family,
        "n_terms": len(terms[0]) if family == "chase" else len(terms),
    }


def build_copy_drill(rng, n_terms, family="late"):
    """A training-only drill for the one step the model learned slowly: the
    block header's copy of a term from the prompt, looked up by its label.
    Prompt "List #1 a*b + ... ." (its own verb, so the model can tell the
    drill from a real problem); the thinking is the n headers "#k a*b" in a
    random order, every operand character a copy token; the answer is the
    number of terms. With family "reuse" the terms have the reuse family's
    operands (b of 1 or 2 digits)."""
    family = "late" if family == "chase" else family  # chase ids: its table teaches the lookup
    terms = make_problem(rng, n_terms, family)
    order = list(range(1, n_terms + 1))
    rng.shuffle(order)
    ids, kind, copy = [], [], []

    def add(toks, k, c=0):
        ids.extend(toks)
        kind.extend([k] * len(toks))
        copy.extend([c] * len(toks))

    add(chat_prompt_ids("List " + prompt_text(terms)[len("Compute "):]), KIND_PROMPT)
    prompt_len = len(ids)
    add(encode_text("\n"), KIND_SCRATCH)
    for k in order:
        a, b = terms[k - 1]
        add(encode_text(f"#{k} "), KIND_SCRATCH)
        add(encode_text(f"{a}*{b}"), KIND_SCRATCH, 1)
        add(encode_text("\n"), KIND_SCRATCH)
    add([END_THINK], KIND_ANSWER)
    add(encode_text(f"\n\n{n_terms}"), KIND_ANSWER)
    add([IM_END], KIND_ANSWER)
    return {"ids": ids, "kind": kind, "step_end": [-1] * len(ids), "copy": copy, "fetch": [0] * len(ids),
            "prompt_len": prompt_len, "think_len": len(ids) - prompt_len, "answer": str(n_terms), "drill": True,
            "family": family, "n_terms": n_terms}


def chat_prompt_ids(prompt):
    """Token ids of the chat prompt up to and including '<think>'."""
    return ([IM_START] + encode_text("user\n" + prompt) + [IM_END] + encode_text("\n") +
            [IM_START] + encode_text("assistant\n") + [THINK])


def generation_prompt_ids(prompt):
    """What the runtime feeds before the first generated token: the chat
    template of the exported GGUF renders the generation prompt as
    '<|im_start|>assistant\n<think>\n', so the newline after <think> is part
    of the prompt (and, like every prompt token, kept by every KV policy).
    Training sees the same token sequence; only evaluation needs the split.
    The model uses that newline as an attention sink: evaluated without it
    in the kept set, the oracle policy lost the last block header's copy."""
    return chat_prompt_ids(prompt) + encode_text("\n")


def heldout_problems(tier, count, seed, fmt=FORMAT, family="late"):
    """A held-out set: count distinct problems of one tier. The late family's
    sets (ids kr-tT-NNN) are those shipped since the first model; the reuse
    family's draw from their own stream (ids kr-reuse-tT-NNN)."""
    if family == "late":
        rng = random.Random(f"heldout-{seed}-{tier}")
        prefix = f"kr-t{tier}"
    else:
        rng = random.Random(f"heldout-{family}-{seed}-{tier}")
        prefix = f"kr-{family}-t{tier}"
    out, seen = [], set()
    while len(out) < count:
        if family == "chase":
            terms = chase.make_problem(rng, *FAMILY_TIERS[family][tier])
        else:
            terms = make_problem(rng, FAMILY_TIERS[family][tier], family)
        key = problem_key(terms)
        if key in seen:
            continue
        seen.add(key)
        ex = build_example(terms, fmt, family)
        rec = {
            "id": f"{prefix}-{len(out):03d}",
            "prompt": prompt_text(terms, fmt, family),
            "answer": ex["answer"],
            "tier": tier,
            "think_tokens": ex["think_len"],
        }
        if family != "late":  # the late sets stay byte for byte as shipped
            rec["family"] = family
        out.append(rec)
    return out


def problem_key(terms):
    """A hashable key of a problem of any family."""
    if isinstance(terms, tuple) and len(terms) == 3 and isinstance(terms[0], list):
        return (tuple(terms[0]), terms[1], terms[2])
    return tuple(terms)


def heldout_terms(seed, count):
    """Keys of all held-out problems of every family (format-independent)."""
    return {problem_key(parse_prompt(p["prompt"])) for fam in FAMILIES for t in FAMILY_TIERS[fam]
            for p in heldout_problems(t, count, seed, FORMAT, fam)}


def excluded_terms(seeds, count=100):
    """Keys of the held-out problems of every seed given: what a training
    stream (or a tool drawing from one) leaves out."""
    return set().union(*(heldout_terms(sd, count) for sd in seeds))


class TrainStream:
    """Seeded stream of training batches, excluding held-out prompts. A batch
    holds one family and one N; with families=("late", "reuse") each family
    gets half of the batches (and so about half of the tokens)."""

    def __init__(self, seed, exclude, tokens_per_batch, fmt=FORMAT, drill=0.0, families=("late",),
                 family_weights=None, mix=None, context=CONTEXT, recall_drill=0.0, assoc_drill=0.0,
                 hops_spread=chase.HOPS_SPREAD, hops_free=False, chase_confusable=0.0):
        self.fmt = fmt
        self.chase_confusable = chase_confusable
        self.hops_spread = hops_spread
        self.hops_free = hops_free
        self.recall_drill = recall_drill
        self.assoc_drill = assoc_drill
        # None: every family alike (the stream of the first two-family runs)
        self.family_weights = family_weights
        self.drill = drill
        self.rng = random.Random(f"train-{seed}")
        self.exclude = exclude
        self.tokens_per_batch = tokens_per_batch
        self.families = list(families)
        mix = mix or FAMILY_MIX
        self.mix = {f: (sorted(mix[f]), [mix[f][n] for n in sorted(mix[f])]) for f in self.families}
        self.context = context

    def _family(self):
        """The family of the next batch; a single-family stream draws exactly as
        before (no family draw)."""
        if len(self.families) == 1:
            return self.families[0]
        if self.family_weights is None:
            return self.rng.choice(self.families)
        return self.rng.choices(self.families, self.family_weights)[0]

    def state(self):
        return self.rng.getstate()

    def set_state(self, st):
        self.rng.setstate(st)

    def _fill(self, make):
        """Examples from make() until the batch holds tokens_per_batch; an
        example longer than the context is drawn again (a recall drill of
        many values can pass a 2,048 context)."""
        exs, tok = [], 0
        while tok < self.tokens_per_batch:
            ex = make()
            if len(ex["ids"]) > self.context:
                continue
            exs.append(ex)
            tok += len(ex["ids"])
        return exs

    def next_batch(self):
        """Returns (family, n, examples)."""
        # one draw decides a drill batch; with no recall drills the stream
        # draws exactly as before, so runs resume onto the same data
        u = self.rng.random() if self.drill > 0 or self.recall_drill > 0 or self.assoc_drill > 0 else 1.0
        recall_end = self.drill + self.recall_drill
        me = sys.modules[__name__]  # the drills build with this module's helpers
        if recall_end <= u < recall_end + self.assoc_drill:
            # random-order reads of printable words: only a lookup by
            # content predicts them (tools/train/induction_lab.py)
            n = self.rng.choice(recall.ASSOC_SIZES)
            return "assoc", n, self._fill(lambda: recall.build_assoc_drill(self.rng, me, n))
        if self.drill <= u < recall_end:
            if self.rng.random() < recall.REPEAT_SHARE:
                n = self.rng.choice(recall.REPEAT_SIZES)
                text = self.rng.random() < recall.REPEAT_TEXT_SHARE
                return ("repeat-text" if text else "repeat"), n, \
                    self._fill(lambda: recall.build_repeat_drill(self.rng, me, n, text))
            fam = self._family()
            n = self.rng.choice(recall.SIZES)
            return "recall-" + fam, n, self._fill(
                lambda: recall.build_recall_drill(self.rng, n, fam, me, self.chase_confusable))
        if u < self.drill:
            fam = self._family()
            n = self.rng.randint(2, 8)
            return "drill-" + fam, n, self._fill(lambda: build_copy_drill(self.rng, n, fam))
        fam = self._family()
        ns, ws = self.mix[fam]
        n = self.rng.choices(ns, ws)[0]

        def problem():
            """A training problem: never a held-out one, never past the context."""
            while True:
                terms = make_problem(self.rng, n, fam, self.hops_spread, self.hops_free)
                if problem_key(terms) in self.exclude:
                    continue
                ex = build_example(terms, self.fmt, fam)
                if len(ex["ids"]) <= self.context:
                    return ex

        return fam, n, self._fill(problem)


def write_set(path, probs):
    with open(path, "w") as f:
        for p in probs:
            f.write(json.dumps(p) + "\n")


def set_stats(probs):
    th = [p["think_tokens"] for p in probs]
    return f"thinking tokens min {min(th)} mean {sum(th) / len(th):.0f} max {max(th)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=FAMILIES, default="late")
    ap.add_argument("--tier", type=int, help="write this tier's held-out set (with --n)")
    ap.add_argument("--n", type=int, default=100, help="number of problems")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="output file of --tier (default: stdout)")
    ap.add_argument("--all", action="store_true",
                    help="write every shipped set: DIR/{late,reuse}-tier{1..4}.jsonl")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))
    ap.add_argument("--show", type=int, default=0, help="print one example with N products and exit")
    args = ap.parse_args()
    if args.show:
        terms = make_problem(random.Random(args.seed), args.show, args.family)
        ex = build_example(terms, FORMAT, args.family)
        sys.stdout.write(decode_ids(ex["ids"]) + "\n")
        print(f"[thinking tokens: {ex['think_len']}, total: {len(ex['ids'])}]")
        return
    if args.tier is not None:
        if args.tier not in FAMILY_TIERS[args.family]:
            sys.exit(f"tier must be one of {sorted(FAMILY_TIERS[args.family])}")
        probs = heldout_problems(args.tier, args.n, args.seed, FORMAT, args.family)
        if args.out:
            write_set(args.out, probs)
            print(f"{args.out}: {len(probs)} problems, {set_stats(probs)}", file=sys.stderr)
        else:
            for p in probs:
                sys.stdout.write(json.dumps(p) + "\n")
        return
    if not args.all:
        ap.error("pass --tier T (one set), --all (every shipped set) or --show N")
    os.makedirs(args.dir, exist_ok=True)
    for fam in FAMILIES:
        for tier, nt in FAMILY_TIERS[fam].items():
            probs = heldout_problems(tier, args.n, args.seed, FORMAT, fam)
            path = os.path.join(args.dir, f"{fam}-tier{tier}.jsonl")
            write_set(path, probs)
            print(f"{path}: {len(probs)} problems, {nt} products, {set_stats(probs)}")


if __name__ == "__main__":
    main()
