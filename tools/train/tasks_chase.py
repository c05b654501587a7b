"""The "chase" task family: pointer chasing through a table the thinking wrote.

The other two families are sums of products whose far reads all sit on
"pK=" lines of one format. This one has another shape: the answer is a node
id reached by following pointers, not a sum, the order of the far reads
depends on the data, and the lines they read come in three formats.

    Chase #23 52*40, #80 94*39, #17 31*57; 3 hops from #23.

Each node's id has two digits (10-99) and its pointer is the last two digits
of its product, which the generator makes equal to another node's id: the
walk from the start passes every node once before it meets one again. The
thinking first writes the table: every product in the late family's block
(header, two partial lines, a 4-wide column addition), then a result line in
one of three formats drawn per node:

    p23=2080            #80 gives 3666            node 17 is 1767

Then it chases. Each hop fetches the current node's product from its table
line by id, far back and in an order only the data decides, and copies its
last two digits as the next id. The hop lines count down from the prompt's
hop count, read from the prompt once at the first hop, so the stop comes
after the line numbered 1, a decision on the last line written:

    hop2 #23 2080 >80
    hop1 #80 3666 >66    (66 would have to be a node: the generator ensures it)

The answer is the id the last hop reaches. The table lines are informative;
headers, partial lines and column additions are scratch of their node, and a
hop line is scratch of its hop.
"""
import random
import re

# thinking kinds, as in tasks.py
KIND_INFO, KIND_SCRATCH = 1, 2

# nodes and hops per tier: the long tier (5) has over 3,000 thinking tokens
TIERS = {1: (3, 3), 2: (4, 5), 3: (6, 7), 4: (8, 10), 5: (24, 28)}
# training mixes: number of nodes -> weight; hops are drawn around the node
# count. The long mix reaches past tier 5.
TRAIN_MIX = {2: 0.5, 3: 1.0, 4: 1.0, 6: 1.0, 8: 1.5, 10: 1.0}
LONG_MIX = {2: 0.5, 3: 1.0, 4: 1.0, 6: 1.0, 8: 1.5, 10: 1.0, 14: 1.0, 20: 0.7, 26: 0.5, 30: 0.3}

TEMPLATES = ("p{k}={v:04d}", "#{k} gives {v:04d}", "node {k} is {v:04d}")
# the table's result lines and the hop lines as a transcript holds them
TABLE_LINE = re.compile(r"(?m)^(?:p(\d+)=|#(\d+) gives |node (\d+) is )(\d{4})$")
HOP_LINE = re.compile(r"(?m)^hop(\d+) #(\d+) (\d{4}) >(\d+)$")

# (a, b) operand pairs of two digits by the last two digits of their product
_BY_RESIDUE = {}
for _a in range(10, 100):
    for _b in range(10, 100):
        _BY_RESIDUE.setdefault(_a * _b % 100, []).append((_a, _b))


# hops of a training problem run from nodes - 1 to nodes + HOPS_SPREAD (the
# runs before 2026-12-07 drew up to nodes + 3, which never reaches tier 5's
# 24 nodes and 28 hops: that model stopped one or two hops early there)
HOPS_SPREAD = 3


def hops_for(rng, n_nodes, spread=HOPS_SPREAD, free=False):
    """Hops of a training problem: about as many as nodes, or with free set
    anything from 1 to nodes + spread, so that only the prompt's count says
    when to stop (a count that follows from the node count is guessed, not
    read: the step-20,475 model overshot tier 5's 28 hops that way)."""
    if free:
        return rng.randint(1, n_nodes + spread)
    return max(1, n_nodes + rng.randint(-1, spread))


def make_problem(rng, n_nodes, n_hops):
    """(nodes, start, hops): nodes is a list of (id, a, b) whose a*b % 100 is
    another node's id. The pointers from the start visit every node once and
    then re-enter the path at a random earlier node, never the last one, so
    no node points to itself (unless it is the only one). Random pointers (the generator before
    2026-12-07) fell into short cycles: a third to two thirds of the answers
    pointed to themselves and a tier-5 walk saw 5.6 of its 24 nodes, so a
    reader that lost the count still scored. Table order and walk order are
    independent draws, so the far reads come in an order only the data says."""
    ids = rng.sample(range(10, 100), n_nodes)
    walk = rng.sample(ids, n_nodes)
    target = {walk[i]: walk[i + 1] for i in range(n_nodes - 1)}
    target[walk[-1]] = walk[rng.randrange(n_nodes - 1)] if n_nodes > 1 else walk[0]
    nodes = [(nid, *rng.choice(_BY_RESIDUE[target[nid]])) for nid in ids]
    return nodes, walk[0], n_hops


def prompt_text(problem):
    nodes, start, hops = problem
    body = ", ".join(f"#{i} {a}*{b}" for i, a, b in nodes)
    return f"Chase {body}; {hops} hops from #{start}."


def is_chase(prompt):
    return prompt.startswith("Chase ")


def parse_prompt(prompt):
    body, tail = prompt[len("Chase "):-1].split("; ")
    nodes = []
    for t in body.split(", "):
        lab, ab = t.split(" ")
        a, b = ab.split("*")
        nodes.append((int(lab[1:]), int(a), int(b)))
    hops = int(tail.split(" ")[0])
    start = int(tail.split("#")[1])
    return nodes, start, hops


def _template_of(problem, nid):
    """The result-line format of a node: fixed by the problem, so a held-out
    transcript is reproducible, and varied across nodes."""
    nodes, start, hops = problem
    rng = random.Random(f"chase-fmt-{start}-{hops}-{nid}-{len(nodes)}")
    return TEMPLATES[rng.randrange(len(TEMPLATES))]


def read_table(text):
    """id -> value of every result line in a transcript, whatever its format."""
    return {int(next(g for g in m.groups()[:3] if g)): int(m.group(4)) for m in TABLE_LINE.finditer(text)}


def solution_lines(problem, product_block):
    """The thinking as (line, kind, step), and the answer. product_block is
    tasks.product_block: the late family's scratch lines of one product."""
    nodes, start, hops = problem
    lines = []
    prod = {}
    step = 0
    for nid, a, b in nodes:
        lines.extend((line, KIND_SCRATCH, step) for line in product_block(nid, a, b))
        prod[nid] = a * b
        lines.append((_template_of(problem, nid).format(k=nid, v=a * b), KIND_INFO, step))
        step += 1
    cur = start
    for h in range(1, hops + 1):
        v = prod[cur]
        nxt = v % 100
        lines.append((f"hop{hops - h + 1} #{cur} {v:04d} >{nxt}", KIND_SCRATCH, step))
        step += 1
        cur = nxt
    return lines, cur


def fetch_spans(line):
    """(first, is_fetch) of a line's long-range copy characters: a block
    header copies its operands from the prompt, a hop line fetches a product
    from the table."""
    if line.startswith("#") and "*" in line:
        return line.index(" ") + 1, False
    if line.startswith("hop"):
        # "hop3 #23 2080 >80": the four digits after the id are the fetch
        i = line.index(" ", line.index("#")) + 1
        return i, True
    return len(line), False
