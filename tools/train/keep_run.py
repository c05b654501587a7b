"""Keeps a training run in git, small enough to commit, so that a later
checkout can resume it.

`tools/train/runs/` is not in git, and each session here starts from a
fresh checkout, so a run that outlasts a session must be kept elsewhere.
This writes RUN's checkpoint without the optimizer's moments (two thirds of
its bytes) beside a copy of its config.json, loss.csv and eval.csv:

    python3 tools/train/keep_run.py --run tools/train/runs/plain3 --to tools/train/checkpoints/plain3

To resume, copy the kept directory back and pass `--resume`; train.py
rebuilds the moments while the learning rate warms up again over
`--warmup` steps, and the data stream, the step count and the logs go on
where they stopped:

    cp -r tools/train/checkpoints/plain3 tools/train/runs/plain3
    python3 tools/train/train.py --run tools/train/runs/plain3 --resume ...
"""
import argparse
import os
import shutil

import torch

LOGS = ("config.json", "loss.csv", "eval.csv")


def keep(run, to):
    """Writes the slim checkpoint and the logs; returns the checkpoint's step."""
    ck = torch.load(os.path.join(run, "ckpt.pt"), map_location="cpu")
    ck.pop("opt", None)
    os.makedirs(to, exist_ok=True)
    tmp = os.path.join(to, "ckpt.pt.tmp")
    torch.save(ck, tmp)
    os.replace(tmp, os.path.join(to, "ckpt.pt"))
    for name in LOGS:
        src = os.path.join(run, name)
        if not os.path.exists(src):
            continue
        if not name.endswith(".csv"):
            shutil.copyfile(src, os.path.join(to, name))
            continue
        # a run still training has logged past its checkpoint: keep the rows
        # up to it, so a resumed run does not log those steps twice
        with open(src, newline="") as f, open(os.path.join(to, name), "w", newline="") as g:
            for line in f:
                first = line.split(",", 1)[0]
                if not line.endswith("\n"):
                    break  # a row being written
                if not first.isdigit() or int(first) <= ck["step"]:
                    g.write(line)
    return ck["step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="the run directory (train.py --run)")
    ap.add_argument("--to", required=True, help="where to keep it (a directory in git)")
    a = ap.parse_args()
    step = keep(a.run, a.to)
    size = os.path.getsize(os.path.join(a.to, "ckpt.pt"))
    print(f"kept {a.run} at step {step} in {a.to} (checkpoint {size / 1e6:.1f} MB, no optimizer state)")


if __name__ == "__main__":
    main()
