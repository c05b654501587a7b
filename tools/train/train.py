#!/usr/bin/env python3
"""Train Kara's small reasoning model on the synthetic tasks of tasks.py.

Seeded, checkpointed and resumable; meant to run in the background:

  nohup nice -n 15 /usr/bin/python3 tools/train/train.py --run tools/train/runs/main \
      > tools/train/runs/main.log 2>&1 &
  # continue a stopped run (same flags, plus --resume):
  nohup nice -n 15 /usr/bin/python3 tools/train/train.py --run tools/train/runs/main --resume ...

Training-time masking: for a random share of the sequences, a query may not
see the scratch tokens of an already finished step that lie more than w
positions back (w random per sequence). Prompt, product result lines and the
current step stay visible (in the reuse family also the running-sum and
check result lines). The model thus learns to rely on the informative
spans, not on finished scratch work, which makes it robust to KV eviction that
keeps the right chunks and not to eviction that keeps only a recent window.
"""
import argparse
import csv
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402
import evaluate  # noqa: E402
import keep_run  # noqa: E402
from model import Config, Model  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="tools/train/runs/main")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init-from", default="", help="start from this checkpoint's weights (new optimizer)")
    ap.add_argument("--format", type=int, default=tasks.FORMAT, help="task format (see tasks.py)")
    ap.add_argument("--seed", type=int, default=1234, help="training seed (model init, data, masks)")
    ap.add_argument("--heldout-seed", type=int, default=1234, help="seed of the held-out sets (excluded)")
    ap.add_argument("--exclude-seeds", type=int, nargs="*", default=[],
                    help="seeds of further held-out sets whose term lists training leaves out")
    ap.add_argument("--families", default="late",
                    help="task families trained, comma-separated (late,reuse,chase)")
    ap.add_argument("--mix", choices=["short", "long", "dense"], default="short",
                    help="problem sizes: short (the first model's, up to about 1,600 thinking tokens), "
                         "long (up to past every family's tier 5; needs --context 8192) or dense (every "
                         "size the long mix spans, each with an equal share)")
    ap.add_argument("--long-boost", type=float, default=1.0,
                    help="multiply the mix weight of every problem size past tier 4's by this (1 = the mix as is)")
    ap.add_argument("--chase-hops-spread", type=int, default=tasks.chase.HOPS_SPREAD,
                    help="chase training problems have nodes - 1 to nodes + this many hops (tier 5 asks nodes + 4; "
                         "3 is the stream of the runs before 2026-12-07)")
    ap.add_argument("--chase-hops-free", action="store_true",
                    help="chase training problems have 1 to nodes + --chase-hops-spread hops, whatever the node count")
    ap.add_argument("--context", type=int, default=tasks.CONTEXT, help="model context; longer problems are redrawn")
    ap.add_argument("--eval-tiers", default="1,4", help="held-out tiers evaluated during training")
    ap.add_argument("--family-weights", default="",
                    help="relative share of batches of each family in --families order (default: equal)")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--tokens-per-batch", type=int, default=4000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--decay-steps", type=int, default=800)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--mask-prob", type=float, default=0.6)
    ap.add_argument("--qk-norm-lr-mult", type=float, default=1.0, help="learning-rate factor of QK-norm gains")
    ap.add_argument("--copy-drill", type=float, default=0.0,
                    help="share of batches that are header-copy drills (tasks.build_copy_drill)")
    ap.add_argument("--recall-drill", type=float, default=0.0,
                    help="share of batches that are recall drills: values the thinking wrote, read back by "
                         "label (tasks_recall.py)")
    ap.add_argument("--chase-confusable", type=float, default=0.0,
                    help="share of chase recall drills whose ids share or swap digits, read as hop lines "
                         "(tasks_recall.confusable_ids)")
    ap.add_argument("--assoc-drill", type=float, default=0.0,
                    help="share of batches of random-order reads of printable words (tasks_recall.build_assoc_drill)")
    ap.add_argument("--copy-weight", type=float, default=1.0, help="loss weight of long-range copy tokens")
    ap.add_argument("--mask-wmin", type=int, default=48)
    ap.add_argument("--mask-wmax", type=int, default=512)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--d-ff", type=int, default=384)
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--untied", action="store_true",
                    help="a separate unembedding matrix (exported as output.weight); see induction_lab.py")
    ap.add_argument("--init", choices=("small", "torch"), default="small",
                    help="linear layers' init: N(0, 0.02) (the shipped models) or PyTorch's default")
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 autocast for the forward pass (weights, optimizer and loss stay fp32)")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=400)
    ap.add_argument("--eval-n", type=int, default=25)
    return ap.parse_args()


def lr_at(a, step):
    """Linear warmup, constant, then a cosine decay over the last
    --decay-steps steps; --steps can thus be changed on --resume while the
    learning rate is still constant without altering the run's history."""
    since = step - getattr(a, "rewarm_from", 0)
    if since < a.warmup:
        return a.lr * (since + 1) / a.warmup
    d0 = a.steps - a.decay_steps
    if step < d0:
        return a.lr
    t = min(1.0, (step - d0) / max(1, a.decay_steps))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def build_allowed(exs, T, ws):
    """Attention mask (B, T, T): causal, minus finished steps' scratch tokens
    that lie w or more positions back, w = ws[b] (0 = no masking). Each row
    uses its own example's spans (reuse-family layouts differ per problem);
    padding after an example's end is never finished scratch."""
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    causal = j <= t
    dist = t - j
    allowed = causal.expand(len(exs), T, T).clone()
    for b, (ex, w) in enumerate(zip(exs, ws)):
        if w > 0:
            pad = T - len(ex["ids"])
            kind = torch.tensor(ex["kind"] + [tasks.KIND_PROMPT] * pad)
            step_end = torch.tensor(ex["step_end"] + [-1] * pad)
            finished = (kind[None, :] == tasks.KIND_SCRATCH) & (t > step_end[None, :])
            allowed[b] &= ~(finished & (dist >= w))
    return allowed


def batch_tensors(exs):
    """A batch's token ids (B, T), padded with <|endoftext|>, and its
    targets (B, T - 1) for the logits of ids[:, :-1]: the prompt and the
    padding stay out of the loss (-100; prompt lengths differ between
    reuse-family problems)."""
    T = max(len(e["ids"]) for e in exs)
    ids = torch.tensor([e["ids"] + [tasks.ENDOFTEXT] * (T - len(e["ids"])) for e in exs])
    tgt = torch.tensor([[-100] * (e["prompt_len"] - 1) + e["ids"][e["prompt_len"]:] + [-100] * (T - len(e["ids"]))
                        for e in exs])
    return ids, tgt


def save_ckpt(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.run, exist_ok=True)
    ck_path = os.path.join(a.run, "ckpt.pt")
    cfg = Config(vocab_size=tasks.VOCAB_SIZE, d_model=a.d_model, n_layers=a.layers, n_heads=a.heads,
                 n_kv_heads=a.kv_heads, head_dim=a.head_dim, d_ff=a.d_ff, rope_base=a.rope_base,
                 context_length=a.context, tied_embeddings=not a.untied, init=a.init)
    torch.manual_seed(a.seed)
    model = Model(cfg)
    # QK-norm gains get their own learning rate: with normalised q and k,
    # these gains alone set how sharp attention can be, and exact long-range
    # lookups (a label among hundreds of positions) need sharp attention.
    qk = [p for n, p in model.named_parameters() if "q_norm" in n or "k_norm" in n]
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and not ("q_norm" in n or "k_norm" in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay, "mult": 1.0},
                             {"params": no_decay, "weight_decay": 0.0, "mult": 1.0},
                             {"params": qk, "weight_decay": 0.0, "mult": a.qk_norm_lr_mult}],
                            lr=a.lr, betas=(0.9, 0.98))
    exclude = tasks.excluded_terms([a.heldout_seed] + a.exclude_seeds)
    families = a.families.split(",")
    fw = [float(x) for x in a.family_weights.split(",")] if a.family_weights else None
    if fw is not None and len(fw) != len(families):
        sys.exit("--family-weights needs one weight per family")
    mix = tasks.boost_long({"short": tasks.FAMILY_MIX, "long": tasks.LONG_MIX, "dense": tasks.DENSE_MIX}[a.mix],
                           a.long_boost)
    stream = tasks.TrainStream(a.seed, exclude, a.tokens_per_batch, a.format, a.copy_drill, families, fw,
                               mix, a.context, a.recall_drill, a.assoc_drill, a.chase_hops_spread,
                               a.chase_hops_free, a.chase_confusable)
    mrng = random.Random(f"mask-{a.seed}")
    step, tokens, elapsed, best = 0, 0, 0.0, -1.0
    if a.resume and os.path.exists(ck_path):
        ck = torch.load(ck_path)
        model.load_state_dict(ck["model"])
        if "opt" in ck:
            opt.load_state_dict(ck["opt"])
        stream.set_state(ck["stream"])
        mrng.setstate(ck["mrng"])
        torch.set_rng_state(ck["torch_rng"])
        step, tokens, elapsed, best = ck["step"], ck["tokens"], ck["elapsed"], ck.get("best", -1.0)
        if "opt" in ck:
            print(f"resumed at step {step}", flush=True)
        else:
            # a kept checkpoint (keep_run.py) has no Adam moments: they are
            # rebuilt while the learning rate warms up again
            a.rewarm_from = step
            print(f"resumed at step {step} without optimizer state: the learning rate warms up again "
                  f"over {a.warmup} steps", flush=True)
    elif os.path.exists(ck_path):
        sys.exit(f"{ck_path} exists: pass --resume or choose another --run")
    elif a.init_from:
        model.load_state_dict(torch.load(a.init_from, map_location="cpu")["model"])
        print(f"initialised from {a.init_from}", flush=True)
    config = {"args": vars(a), "model": cfg.to_dict(), "train_mix": {f: mix[f] for f in families},
              "tiers": {f: tasks.FAMILY_TIERS[f] for f in families},
              "params": sum(p.numel() for p in model.parameters()), "torch": torch.__version__}
    cfg_path = os.path.join(a.run, "config.json")
    history = []
    if a.resume and os.path.exists(cfg_path):
        old = json.load(open(cfg_path))
        history = old.get("history", [{"from_step": 0, "args": old["args"]}])
    config["history"] = history + [{"from_step": step, "args": vars(a)}]
    with open(cfg_path, "w") as f:
        json.dump(config, f, indent=1)
    print(json.dumps(config), flush=True)
    loss_csv = os.path.join(a.run, "loss.csv")
    if a.resume:
        # a run stopped past its checkpoint logged steps it now trains again
        for name in ("loss.csv", "eval.csv"):
            if os.path.exists(os.path.join(a.run, name)):
                keep_run.trim_csv(os.path.join(a.run, name), os.path.join(a.run, name), step)
    new_file = not os.path.exists(loss_csv)
    lf = open(loss_csv, "a", newline="")
    lw = csv.writer(lf)
    if new_file:
        lw.writerow(["step", "tokens", "seconds", "lr", "n_terms", "loss", "masked_frac", "family"])
    # held-out evaluation: --eval-tiers of every trained family
    evsets = [(f, int(t)) for f in families for t in a.eval_tiers.split(",")]
    heldout = {(f, t): tasks.heldout_problems(t, 100, a.heldout_seed, a.format, f) for f, t in evsets}
    t_last = time.time()
    while step < a.steps:
        fam, n, exs = stream.next_batch()
        B = len(exs)
        ids, tgt = batch_tensors(exs)
        T = ids.shape[1]
        ws = [mrng.randint(a.mask_wmin, a.mask_wmax) if mrng.random() < a.mask_prob else 0 for _ in range(B)]
        if exs[0].get("drill"):
            ws = [0] * B  # nothing finished to mask in a drill
        allowed = build_allowed(exs, T, ws) if any(ws) else None
        lr = lr_at(a, step)
        for g in opt.param_groups:
            g["lr"] = lr * g["mult"]
        model.train()
        # bf16 autocast: a step 1.7-7.9x faster on this AVX512-BF16 host
        # (bf16_check.py), where torch's fp32 batched attention matmuls are
        # slow; the loss is taken in fp32.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(ids[:, :-1], allowed[:, :-1, :-1] if allowed is not None else None, a.chunk)
        logits = logits.float()
        start = min(e["prompt_len"] for e in exs) - 1
        ce = F.cross_entropy(logits[:, start:].reshape(-1, cfg.vocab_size), tgt[:, start:].reshape(-1),
                             reduction="none")
        wt = torch.tensor([e["copy"][1:] + [0] * (T - len(e["ids"])) for e in exs], dtype=torch.float32)
        wt = (1.0 + (a.copy_weight - 1.0) * wt[:, start:]).reshape(-1) * (tgt[:, start:].reshape(-1) >= 0)
        valid = (tgt[:, start:].reshape(-1) >= 0).float()
        loss = (ce * wt).sum() / wt.sum()
        plain = ((ce * valid).sum() / valid.sum()).item()  # logged: unweighted mean
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += sum(len(e["ids"]) for e in exs)
        now = time.time()
        elapsed += now - t_last
        t_last = now
        lw.writerow([step, tokens, round(elapsed, 1), f"{lr:.6f}", n, f"{plain:.5f}",
                     f"{sum(1 for w in ws if w) / B:.2f}", fam])
        if step % 10 == 0:
            lf.flush()
            print(f"step {step} loss {plain:.4f} wloss {loss.item():.4f} {fam} n {n} B {B} lr {lr:.5f} "
                  f"tok {tokens} {tokens / max(elapsed, 1e-9):.0f} tok/s elapsed {elapsed / 60:.1f} min",
                  flush=True)
        ev = None
        if step % a.eval_every == 0 or step == a.steps:
            t0 = time.time()
            model.eval()
            ev = {}
            for key in evsets:
                acc, think, _ = evaluate.evaluate(model, heldout[key][:a.eval_n])
                ev[key] = acc
            print(f"eval step {step}: " + " ".join(f"{f}-tier{t} {v:.2f}" for (f, t), v in ev.items()) +
                  f" ({time.time() - t0:.0f}s)", flush=True)
            # eval.csv: step, tokens, seconds, then one accuracy per set in the
            # order of --families, then --eval-tiers (late-t1, late-t4, reuse-t1, ...)
            with open(os.path.join(a.run, "eval.csv"), "a") as f:
                f.write(f"{step},{tokens},{elapsed:.0f}," + ",".join(f"{v:.3f}" for v in ev.values()) + "\n")
            t_last = time.time()  # evaluation time is not training time
        state = None
        if ev is not None or step % a.ckpt_every == 0 or step == a.steps:
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "stream": stream.state(),
                     "mrng": mrng.getstate(), "torch_rng": torch.get_rng_state(), "step": step,
                     "tokens": tokens, "elapsed": elapsed, "best": best, "config": cfg.to_dict()}
        # best.pt: the checkpoint whose worst evaluated set is best (ties: the later)
        if ev is not None and min(ev.values()) >= best:
            best = min(ev.values())
            state["best"] = best
            save_ckpt(os.path.join(a.run, "best.pt"), {"model": model.state_dict(), "config": cfg.to_dict(),
                                                       "step": step, "eval": {f"{f}-{t}": v for (f, t), v in
                                                                              ev.items()}})
        if state is not None:
            save_ckpt(ck_path, state)
    lf.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
