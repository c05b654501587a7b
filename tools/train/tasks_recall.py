"""Recall drills: training-only data for the lookup the plain model learns
slowest, a value the thinking wrote read back later by its label.

The copy drill (tasks.build_copy_drill) teaches the block header's copy of a
term from the prompt. The far reads of every family are another lookup: a
result line the thinking wrote ("p3=2080", "#23 gives 2080", "node 23 is
2080") is found by its label, hundreds of tokens later, and its four digits
copied in order. Under plain next-token loss these reads are about one
token in a hundred, so the plain run (docs/TRAINING_PLAIN.md) reached 98% of all
tokens with only 51-63% of the fetch tokens right. A recall drill is data,
not a loss weight: most of its loss is on exactly those reads.

    Recall 5 values.
    p3=4821             (the table: random labels and values, in the
    #7 gives 0932        three result-line formats of the families)
    ...
    #4 52*40            (filler: real product blocks, for distance)
    ...
    s1+p3=4821          (reads in the families' read formats, in random
    hop2 #7 0932 >32     order, some repeated, between filler blocks)

The answer is the number of values. The labels are 1..n (late, reuse) or
distinct two-digit ids (chase), as in the family the drill is drawn for.
"""
import tasks_chase

# the table's result-line formats: the ones chase's tables use
TABLE_FORMATS = tasks_chase.TEMPLATES
# a read is the prefix naming the label, then the four fetched digits, then a tail
READ_FORMATS = ("s{i}=p{k}=", "s{i}+p{k}=", "c{i}+p{k}=", "hop{i} #{k} ")
# values per drill, weighted toward small tables: a model that cannot yet
# look anything up learns it first where two or three values sit close by
SIZES = (2, 2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24)
# product blocks of filler before a read (most reads follow each other)
FILLER = (0, 0, 0, 1, 2)
# share of the recall batches that are repeat drills (build_repeat_drill)
REPEAT_SHARE = 0.5
# numbers per repeat line in training, weighted toward short lines: a fresh
# model of the wider shape began to copy digits on lines of 2-6 numbers
# (docs/TRAINING_PLAIN.md) and not yet on 3-30 (copy_probe's lines)
REPEAT_SIZES = (2, 2, 3, 3, 4, 4, 5, 6, 8, 10, 12, 16, 20, 24, 30)
# share of the repeat drills whose words are random printable characters
# instead of digits: fresh models of the shipped shape that copied such
# lines first went on to copy digit lines (94% and 53% within 1,000 steps,
# two seeds), where digits alone stayed at chance (docs/TRAINING_PLAIN.md);
# in runs/plain2 itself these words stayed at chance through step 3,000
REPEAT_TEXT_SHARE = 0.5
# words per random-order read drill in training (train.py --assoc-drill):
# induction_lab.py's models began to look up by content on 2-12
ASSOC_SIZES = (2, 3, 4, 5, 6, 8, 10, 12, 16, 24)


class _Transcript:
    """A drill's tokens, from its chat prompt on, with each token's kind and
    fetch flag; finish() closes the thinking, answers and returns the
    example in the shape tasks.build_example gives."""

    def __init__(self, T, prompt):
        self.T = T
        self.ids, self.kind, self.fetch = [], [], []
        self.add_ids(T.chat_prompt_ids(prompt), T.KIND_PROMPT)
        self.prompt_len = len(self.ids)

    def add_ids(self, toks, k, fetched=0):
        self.ids.extend(toks)
        self.kind.extend([k] * len(toks))
        self.fetch.extend([fetched] * len(toks))

    def add(self, text, k, fetched=0):
        self.add_ids(self.T.encode_text(text), k, fetched)

    def finish(self, n, family):
        T = self.T
        self.add_ids([T.END_THINK], T.KIND_ANSWER)
        self.add(f"\n\n{n}", T.KIND_ANSWER)
        self.add_ids([T.IM_END], T.KIND_ANSWER)
        ids = self.ids
        return {"ids": ids, "kind": self.kind, "step_end": [-1] * len(ids), "copy": [0] * len(ids),
                "fetch": self.fetch, "prompt_len": self.prompt_len, "think_len": len(ids) - self.prompt_len,
                "answer": str(n), "drill": True, "family": family, "n_terms": n}


def confusable_ids(rng, n):
    """n distinct two-digit ids made of the fewest digits that give n of
    them (#43 beside #34, #46 and #33): nearly every id shares a digit with
    another or is its swap. Greedy chase transcripts fetch the wrong node
    mostly between such ids (docs/TRAINING_PLAIN.md); a table of them has no
    read that one matching digit gets right."""
    k = 2
    while k * k < n:
        k += 1
    digits = rng.sample(range(1, 10), k)
    return rng.sample([10 * a + b for a in digits for b in digits], n)


def build_recall_drill(rng, n, family, T, confusable=0.0):
    """One recall drill of n values for family's labels; T is the tasks
    module (its token helpers, kinds and product blocks). With confusable,
    that share of chase drills takes confusable_ids and reads them as
    chase's hop lines do; at 0 the drill draws exactly as before."""
    hard = family == "chase" and confusable > 0 and rng.random() < confusable
    if hard:
        labels = confusable_ids(rng, n)
    elif family == "chase":
        labels = rng.sample(range(10, 100), n)
    else:
        labels = list(range(1, n + 1))
    values = {k: rng.randint(0, 9999) for k in labels}
    d = _Transcript(T, f"Recall {n} values.")
    d.add("\n", T.KIND_SCRATCH)
    order = labels[:]
    rng.shuffle(order)
    # half the drills write "pK=" and read "...pK=": the read repeats the
    # table line's prefix, so copying what followed it works (the late and
    # reuse families' case); the rest mix the formats (chase's case)
    same = not hard and rng.random() < 0.5
    for k in order:
        d.add((TABLE_FORMATS[0] if same else rng.choice(TABLE_FORMATS)).format(k=k, v=values[k]) + "\n", T.KIND_INFO)
    # reads: every value once in a random order, plus up to n/2 repeats
    reads = labels[:] + [rng.choice(labels) for _ in range(rng.randint(0, n // 2))]
    rng.shuffle(reads)
    # one read format per drill
    fmt = READ_FORMATS[3] if hard else rng.choice(READ_FORMATS[:3] if same else READ_FORMATS)
    for i, k in enumerate(reads, 1):
        for _ in range(rng.choice(FILLER)):
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            for line in T.product_block(rng.randint(1, 99), a, b):
                d.add(line + "\n", T.KIND_SCRATCH)
        d.add(fmt.format(i=i, k=k), T.KIND_SCRATCH)
        v = values[k]
        d.add(f"{v:04d}", T.KIND_SCRATCH, 1)
        d.add(f" >{v % 100:02d}\n" if fmt.startswith("hop") else "\n", T.KIND_SCRATCH)
    return d.finish(n, family)


def printable_words(rng, n):
    """n words of four random printable characters (33-126, a 94-symbol
    alphabet: a copy head forms on it where it does not on ten digits)."""
    return ["".join(chr(rng.randint(33, 126)) for _ in range(4)) for _ in range(n)]


def build_repeat_drill(rng, T, n=None, text=False):
    """The plainest copy there is: the thinking writes n random four-digit
    numbers on a line (3-30 when n is None, as copy_probe draws them), then
    the same line again; with text, n words of four random printable
    characters. Every character of the second line but the spaces is a
    fetch: predicting it needs a head that finds where the previous token
    stood in the first line and copies what came next, the mechanism a
    lookup by label is built from."""
    if n is None:
        n = rng.randint(3, 30)
    if text:
        words = printable_words(rng, n)
    else:
        words = [f"{rng.randint(0, 9999):04d}" for _ in range(n)]
    d = _Transcript(T, f"Repeat {n} {'words' if text else 'numbers'}.")
    d.add("\n" + " ".join(words) + "\n", T.KIND_INFO)
    for j, w in enumerate(words):
        if j:
            d.add(" ", T.KIND_SCRATCH)
        d.add(w, T.KIND_SCRATCH, 1)
    d.add("\n", T.KIND_SCRATCH)
    return d.finish(n, "repeat")


def build_assoc_drill(rng, T, n):
    """A lookup by content alone (copy_probe.py's probe, induction_lab.py's
    data, and train.py --assoc-drill's training drills): n words of
    four random printable characters, one per line, then each read back in a
    random order, its first character given. Characters 2-4 of a read are
    fetches: the only way to them is a head that finds the table position
    after the character just written and copies what stood there. No fixed
    offset does it (the order is random), unlike a repeat drill's second
    line, which a head reading a fixed distance back can copy."""
    words = printable_words(rng, n)
    d = _Transcript(T, f"Recall {n} words.")
    d.add("\n", T.KIND_SCRATCH)
    for w in words:
        d.add(w + "\n", T.KIND_INFO)
    order = words[:]
    rng.shuffle(order)
    for w in order:
        d.add(w[0], T.KIND_SCRATCH)
        d.add(w[1:], T.KIND_SCRATCH, 1)
        d.add("\n", T.KIND_SCRATCH)
    return d.finish(n, "assoc")
