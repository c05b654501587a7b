"""Is `train.py --bf16` safe and faster on this machine? For a checkpoint
and a few batches of the training stream, one forward and backward pass in
fp32 and one under bf16 autocast: the loss of each, the cosine between the
two gradients, the ratio of their norms and the time of each pass.

    /usr/bin/python3 tools/train/bf16_check.py --model runs/plain2/ckpt.pt
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import evaluate
import tasks
from train import batch_tensors


def one_pass(model, ids, tgt, bf16):
    """Loss, flattened gradient and seconds of one forward and backward pass."""
    model.zero_grad()
    t = time.time()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    return loss.item(), grad, time.time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a training checkpoint (ckpt.pt)")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--seed", type=int, default=99, help="seed of the stream the batches come from")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = evaluate.load_model(a.model)
    model.train()
    stream = tasks.TrainStream(a.seed, set(), 4000, tasks.FORMAT, 0.1, tasks.FAMILIES, None, tasks.FAMILY_MIX,
                               model.c.context_length, 0.7)
    for _ in range(a.batches):
        kind, _, exs = stream.next_batch()
        ids, tgt = batch_tensors(exs)
        l32, g32, t32 = one_pass(model, ids, tgt, False)
        l16, g16, t16 = one_pass(model, ids, tgt, True)
        print(json.dumps({"batch": kind, "sequences": len(exs), "tokens": ids.shape[1], "loss_fp32": round(l32, 4),
                          "loss_bf16": round(l16, 4), "grad_cosine": round(F.cosine_similarity(g32, g16, dim=0).item(), 4),
                          "grad_norm_ratio": round((g16.norm() / g32.norm()).item(), 3), "seconds_fp32": round(t32, 2),
                          "seconds_bf16": round(t16, 2)}), flush=True)


if __name__ == "__main__":
    main()
