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

    cp -rT tools/train/checkpoints/plain3 tools/train/runs/plain3
    python3 tools/train/train.py --run tools/train/runs/plain3 --resume ...
"""
import argparse
import os
import shutil

import torch

LOGS = ("config.json", "loss.csv", "eval.csv")


def trim_csv(src, dst, step):
    """Copies a run's log (loss.csv, eval.csv: a header, then rows whose
    first field is the step) keeping the rows up to `step`. A step logged
    twice (a run stopped past its checkpoint, then resumed from it) keeps
    its last row, which the resumed run wrote; a row still being written
    (no newline) is left out. dst may be src."""
    with open(src, newline="") as f:
        lines = f.readlines()
    head, rows = [], {}
    for line in lines:
        if not line.endswith("\n"):
            break
        first = line.split(",", 1)[0]
        if not first.isdigit():
            head.append(line)
        elif int(first) <= step:
            rows[int(first)] = line
    tmp = dst + ".tmp"
    with open(tmp, "w", newline="") as g:
        g.writelines(head + [rows[s] for s in sorted(rows)])
    os.replace(tmp, dst)


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
        if name.endswith(".csv"):
            # a run still training has logged past its checkpoint: the rows
            # up to it, so that the resumed run does not log steps twice
            trim_csv(src, os.path.join(to, name), ck["step"])
        else:
            shutil.copyfile(src, os.path.join(to, name))
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
