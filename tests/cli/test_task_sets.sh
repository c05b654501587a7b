#!/usr/bin/env bash
# The reasoning task sets (tools/train/tasks.py, issue 46): `tasks.py --all`
# reproduces every shipped held-out set byte for byte (the first model's late
# and reuse sets included, so adding tiers and families changed none of
# them); the long tier (5) of every family has at least 3,000 mean thinking
# tokens and fits an 8,192 context; and the chase family's transcripts are
# what they claim: the hop lines count down from the prompt's hop count to
# 1, every hop fetches the product of the node it is at, the pointer is that
# product's last two digits and names a node, the answer is the node the
# last hop reaches, and the table's result lines come in all three formats.
# The recall drills (tools/train/tasks_recall.py) read back exactly what
# their tables wrote, flag those digits as fetches, and leave the
# training stream unchanged when their share is 0 (recall and random-order
# read drills alike); the random-order read
# probes read every table word once and flag all but its given first character.
set -u
. "$(dirname "$0")/lib/common.sh"
SRC="${KARA_SOURCE_DIR:?KARA_SOURCE_DIR must name the source tree}"
T="$SRC/tools/train/tasks.py"

python3 "$T" --all --dir "$tmp/sets" >"$tmp/all.txt" || exit 1
for f in "$SRC"/tests/data/{late,reuse,chase}-tier[1-5].jsonl; do
    check "$(basename "$f") is reproduced byte for byte" 'cmp -s "$f" "$tmp/sets/$(basename "$f")"'
done
check "15 sets are shipped (3 families, 5 tiers)" \
    '[ "$(ls "$SRC"/tests/data/{late,reuse,chase}-tier[1-5].jsonl | wc -l)" -eq 15 ]'

# py_check NAME ARGS...: runs the Python script on stdin with ARGS; it prints
# its findings, "ok" last when there are none, and exits non-zero on any.
py_check() {
    local name=$1 out
    shift
    out=$(python3 - "$@" 2>&1)
    local rc=$?
    check "$name ($(tail -1 <<<"$out"))" '[ $rc -eq 0 ]'
    [ $rc -eq 0 ] || echo "$out"
}

py_check "long tiers and chase transcripts hold" "$SRC/tools/train" "$SRC/tests/data" <<'EOF'
import json, re, sys
sys.path.insert(0, sys.argv[1])
import tasks, chase_check
data = sys.argv[2]
bad = []
for fam in tasks.FAMILIES:
    probs = [json.loads(l) for l in open(f"{data}/{fam}-tier5.jsonl")]
    mean = sum(p["think_tokens"] for p in probs) / len(probs)
    longest = max(len(tasks.example_for_prompt(p["prompt"])["ids"]) for p in probs)
    print(f"{fam} tier 5: mean thinking {mean:.0f}, longest transcript {longest}")
    if mean < 3000 or longest > 8192:
        bad.append(f"{fam} tier 5: mean {mean:.0f} longest {longest}")
formats = set()
for tier in range(1, 6):
    for p in (json.loads(l) for l in open(f"{data}/chase-tier{tier}.jsonl")):
        nodes, start, hops = tasks.parse_prompt(p["prompt"])
        prod = {i: a * b for i, a, b in nodes}
        ex = tasks.example_for_prompt(p["prompt"])
        text = tasks.decode_ids(ex["ids"])
        # the walk passes every node before it meets one again, and no node
        # points to itself (random pointers answered by self-loops)
        walk, at = [], start
        for _ in range(len(nodes)):
            walk.append(at)
            at = prod[at] % 100
        if len(set(walk)) != len(nodes) or at == walk[-1] or at not in walk:
            bad.append(f"{p['id']}: the walk {walk} then {at} does not pass every node once")
        # every result line and hop line right, the stop at the count, the
        # answer the walk's end (chase_check's verdict on a transcript)
        verdict, detail = chase_check.diagnose(p["prompt"], text, ex["answer"])
        if verdict != "ok" or ex["answer"] != p["answer"]:
            bad.append(f"{p['id']}: {verdict}: {detail}; answer {ex['answer']}, the set's {p['answer']}")
        for i, v in prod.items():
            for k, pat in enumerate((rf"\np{i}={v:04d}\n", rf"\n#{i} gives {v:04d}\n", rf"\nnode {i} is {v:04d}\n")):
                if re.search(pat, text):
                    formats.add(k)
print("chase result-line formats seen:", sorted(formats))
if formats != {0, 1, 2}:
    bad.append(f"chase result lines use formats {sorted(formats)}, not all three")
# the dense mix trains every size the long mix spans, every held-out tier's
# among them (the long mix skips tier 5's, and a model trained on it stops at
# the sizes it saw), boost_long multiplies only the sizes past tier 4, and
# chase's hop spread reaches every tier's hops
for fam, tiers in tasks.FAMILY_TIERS.items():
    dense, long_ = tasks.DENSE_MIX[fam], tasks.LONG_MIX[fam]
    sizes = [tasks.tier_size(fam, t) for t in tiers]
    if sorted(dense) != list(range(min(long_), max(long_) + 1)) or any(n not in dense for n in sizes):
        bad.append(f"{fam}: dense mix sizes {sorted(dense)} miss the long mix's span or a tier of {sizes}")
    boosted = tasks.boost_long({fam: long_}, 3.0)[fam]
    t4 = sizes[3]
    if any(boosted[n] != long_[n] * (3.0 if n > t4 else 1.0) for n in long_):
        bad.append(f"{fam}: boost_long gave {boosted}")
# chase's training hops: nodes - 1 to nodes + spread, or 1 to nodes + spread
# when free. The old spread (3) never reaches tier 5's 24 nodes and 28 hops;
# a spread of 6 reaches every tier's
import random
import tasks_chase
def hops_drawn(n, spread, free=False):
    rng = random.Random(5)
    return {tasks.make_problem(rng, n, "chase", spread, free)[2] for _ in range(400)}
# free hops do not follow the node count: 24 nodes get 1 to 30
if hops_drawn(24, 6, True) != set(range(1, 31)):
    bad.append(f"free hops for 24 nodes, spread 6: {sorted(hops_drawn(24, 6, True))}, not 1-30")
for tier, (n, h) in tasks_chase.TIERS.items():
    if h not in hops_drawn(n, 6):
        bad.append(f"chase tier {tier} ({n} nodes, {h} hops): spread 6 never draws {h} hops")
if 28 in hops_drawn(24, 3) or hops_drawn(24, tasks_chase.HOPS_SPREAD) != set(range(23, 28)):
    bad.append(f"24 nodes: spread 3 drew hops {sorted(hops_drawn(24, 3))}, the default spread "
               f"({tasks_chase.HOPS_SPREAD}) {sorted(hops_drawn(24, tasks_chase.HOPS_SPREAD))}; both should be 23-27")
print("\n".join(bad[:10]) or "ok")
sys.exit(1 if bad else 0)
EOF

# chase_check.py names the first error of a chase transcript: the shipped
# transcripts pass, and one planted error of each kind is found as that kind
py_check "chase_check names each planted error" "$SRC/tools/train" "$SRC/tests/data" <<'EOF'
import json, re, sys
sys.path.insert(0, sys.argv[1])
import tasks, chase_check
bad = []
probs = [json.loads(l) for l in open(f"{sys.argv[2]}/chase-tier4.jsonl")][:6]
def thinking(p):
    ex = tasks.example_for_prompt(p["prompt"])
    return tasks.decode_ids(ex["ids"][ex["prompt_len"]:]).split("</think>")[0]
def bump_first_hop(t):
    m = re.search(r"(?m)^hop\d+ #\d+ (\d{4}) ", t)
    return t[:m.start(1)] + f"{(int(m.group(1)) + 1) % 10000:04d}" + t[m.end(1):]
def bump_first_result(t):
    return re.sub(r"(?m)^(p\d+=|#\d+ gives |node \d+ is )(\d)",
                  lambda m: m.group(1) + str((int(m.group(2)) + 1) % 10), t, count=1)
plants = {
    "ok": lambda t: t,
    "table": bump_first_result,
    "fetch": bump_first_hop,
    "stop": lambda t: t.rstrip("\n").rsplit("\n", 1)[0] + "\n",
    "hop line": lambda t: re.sub(r"(?m)^hop(\d+)", lambda m: f"hop{int(m.group(1)) + 1}", t, count=1),
}
for p in probs:
    for want, plant in plants.items():
        verdict, detail = chase_check.diagnose(p["prompt"], plant(thinking(p)), p["answer"])
        if verdict != want:
            bad.append(f"{p['id']}: planted {want}, found {verdict} ({detail})")
    wrong = "10" if p["answer"] != "10" else "11"
    if chase_check.diagnose(p["prompt"], thinking(p), wrong)[0] != "answer":
        bad.append(f"{p['id']}: a wrong answer after a right walk not found")
print("\n".join(bad[:10]) or "ok")
sys.exit(1 if bad else 0)
EOF

# Recall drills (tools/train/tasks_recall.py): every read copies the value its
# label got in the table, the fetch flags mark exactly those digits, and a
# stream without recall drills draws the same batches as before they existed
# (so a run resumes onto the same data).
py_check "recall drills read what their tables wrote" "$SRC/tools/train" <<'EOF'
import random, re, sys
sys.path.insert(0, sys.argv[1])
import tasks, tasks_chase, tasks_recall
# a read line: the prefix naming the label, the label, then its four digits
READ_LINE = re.compile(r"(?m)^(s\d+=p|s\d+\+p|c\d+\+p|hop\d+ #)(\d+)[= ](\d{4})")
bad = []
rng = random.Random(7)
reads_seen = set()
for i in range(60):
    fam = tasks.FAMILIES[i % 3]
    ex = tasks_recall.build_recall_drill(rng, rng.randint(3, 24), fam, tasks)
    text = tasks.decode_ids(ex["ids"])
    table = {k: f"{v:04d}" for k, v in tasks_chase.read_table(text).items()}
    want = []
    for m in READ_LINE.finditer(text):
        reads_seen.add(re.sub(r"\d", "", m.group(1)))
        if table.get(int(m.group(2))) != m.group(3):
            bad.append(f"drill {i}: read {m.group(0).strip()} but the table has {table.get(int(m.group(2)))}")
        want.append(m.group(3))
    got = "".join(tasks.decode_ids([t]) for t, f in zip(ex["ids"], ex["fetch"]) if f)
    if got != "".join(want) or len(table) != int(ex["answer"]):
        bad.append(f"drill {i}: fetch flags mark '{got[:40]}', reads are '{''.join(want)[:40]}'")
if len(reads_seen) != 4:
    bad.append(f"read formats seen: {sorted(reads_seen)}")
# confusable chase drills (train.py --chase-confusable): ids of the fewest
# digits that give n of them, each read as a hop line, the right value fetched
for i in range(30):
    n = rng.randint(2, 24)
    ex = tasks_recall.build_recall_drill(rng, n, "chase", tasks, confusable=1.0)
    text = tasks.decode_ids(ex["ids"])
    table = {k: f"{v:04d}" for k, v in tasks_chase.read_table(text).items()}
    digits = {c for k in table for c in str(k)}
    reads = READ_LINE.findall(text)
    if len(table) != n or len(digits) ** 2 < n or (len(digits) - 1) ** 2 >= n or "0" in digits:
        bad.append(f"confusable drill {i}: {n} ids {sorted(table)} of digits {sorted(digits)}")
    if len(reads) < n or any(not p.startswith("hop") or table.get(int(k)) != v for p, k, v in reads):
        bad.append(f"confusable drill {i}: reads {reads[:3]} of table {sorted(table.items())[:3]}")
a = tasks.TrainStream(4242, set(), 3000, drill=0.3, families=tasks.FAMILIES)
b = tasks.TrainStream(4242, set(), 3000, drill=0.3, families=tasks.FAMILIES, recall_drill=0.0)
for _ in range(20):
    fa, na, ea = a.next_batch()
    fb, nb, eb = b.next_batch()
    if (fa, na, [e["ids"] for e in ea]) != (fb, nb, [e["ids"] for e in eb]):
        bad.append("recall_drill 0 changed the stream")
        break
c = tasks.TrainStream(4242, set(), 3000, drill=0.2, families=tasks.FAMILIES, recall_drill=0.4)
batches = [c.next_batch() for _ in range(200)]
kinds = [f.split("-")[0] for f, _, _ in batches]
for f, n, exs in batches:
    # a repeat batch's lines all hold the batch's count of numbers, drawn from REPEAT_SIZES
    if f.startswith("repeat") and (n not in tasks_recall.REPEAT_SIZES or any(e["answer"] != str(n) for e in exs)):
        bad.append(f"repeat batch of n {n}: lines of {sorted({e['answer'] for e in exs})}")
share = (kinds.count("recall") + kinds.count("repeat")) / 200
if not 0.3 < share < 0.5 or not kinds.count("repeat"):
    bad.append(f"recall share {share} of 200 batches ({kinds.count('repeat')} repeat), asked 0.4")
if "repeat-text" not in [f for f, _, _ in batches]:
    bad.append("no repeat drill of printable characters in 200 batches")
for i in range(20):
    ex = tasks_recall.build_repeat_drill(rng, tasks, text=i % 2 == 1)
    first, second = tasks.decode_ids(ex["ids"][ex["prompt_len"]:]).split("\n")[1:3]
    got = "".join(tasks.decode_ids([t]) for t, f in zip(ex["ids"], ex["fetch"]) if f)
    if first != second or got != second.replace(" ", "") or len(second.split()) != int(ex["answer"]):
        bad.append(f"repeat drill {i}: '{first[:30]}' / '{second[:30]}', fetches '{got[:30]}'")
# random-order read batches (--assoc-drill): their share, their sizes, and
# the stream of a run without them drawn exactly as before they existed (the
# first 30 batches of this stream, fingerprinted before the option was added
# and again at each change of chase since: count-down hop lines, then
# pointers that pass every node)
import hashlib
h = hashlib.sha256()
c0 = tasks.TrainStream(4242, set(), 3000, drill=0.2, families=tasks.FAMILIES, recall_drill=0.4)
for _ in range(30):
    f, n, exs = c0.next_batch()
    h.update(repr((f, n, [e["ids"] for e in exs])).encode())
if h.hexdigest()[:16] != "d1334316d84d36e6":
    bad.append(f"a stream without assoc drills changed: fingerprint {h.hexdigest()[:16]}")
d = tasks.TrainStream(4242, set(), 3000, drill=0.1, families=tasks.FAMILIES, recall_drill=0.4, assoc_drill=0.3)
batches = [d.next_batch() for _ in range(200)]
kinds = [f.split("-")[0] for f, _, _ in batches]
if not 0.2 < kinds.count("assoc") / 200 < 0.4 or not 0.3 < (kinds.count("recall") + kinds.count("repeat")) / 200 < 0.5:
    bad.append(f"assoc {kinds.count('assoc')} and recall {kinds.count('recall') + kinds.count('repeat')} of 200 batches, "
               "asked 0.3 and 0.4")
for f, n, exs in batches:
    if f == "assoc" and (n not in tasks_recall.ASSOC_SIZES or any(e["answer"] != str(n) for e in exs)):
        bad.append(f"assoc batch of n {n}: tables of {sorted({e['answer'] for e in exs})}")
# drills longer than the stream's context are drawn again, as problems are
short = tasks.TrainStream(4242, set(), 3000, drill=0.2, families=tasks.FAMILIES, recall_drill=0.7, context=2048)
longest = max(len(e["ids"]) for _ in range(100) for e in short.next_batch()[2])
if longest > 2048:
    bad.append(f"a batch of a 2,048-token stream holds an example of {longest} tokens")
# a random-order read drill: every table word read back once, its first
# character given and exactly the other three flagged as fetches
for i in range(10):
    ex = tasks_recall.build_assoc_drill(rng, tasks, 2 + i)
    lines = tasks.decode_ids(ex["ids"][ex["prompt_len"]:]).split("\n")[1:]
    table, reads = lines[:2 + i], lines[2 + i:4 + 2 * i]
    got = "".join(tasks.decode_ids([t]) for t, f in zip(ex["ids"], ex["fetch"]) if f)
    if sorted(table) != sorted(reads) or got != "".join(w[1:] for w in reads) or len(set(map(len, table))) != 1:
        bad.append(f"assoc drill {i}: table {table[:3]}, reads {reads[:3]}, fetches '{got[:30]}'")
print("\n".join(bad[:10]) or "ok")
sys.exit(1 if bad else 0)
EOF
finish
