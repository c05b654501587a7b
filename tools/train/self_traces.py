#!/usr/bin/env python3
"""Traces for the retention prior from the model's own generated text.

  /usr/bin/python3 tools/train/self_traces.py --model M.gguf --n 200 --seed 100000 --out traces.jsonl
      [--tokens 480] [--temp 0.8] [--prompt TEXT ...] [--ctx 0] [--ignore-eos] [--kara build/bin/kara]

Runs `kara run` N times with full KV and sampling seeds seed, seed+1, ...,
so every text differs and each is reproducible from its seed. Without
--prompt each text starts at BOS; with prompts (short, neutral openings for
models that need one, such as chat models without a BOS token) trace i
starts from prompt i mod P and the prompt is recorded apart, so the prior is
not trained on it (the runtime never evicts the prompt). No task, answer or
label enters: retention_prior.py labels the tokens by the model's own
attention. Writes one JSONL record a trace:

  {"text": "...", "prompt_tokens": 0, "seed": S}                 (from BOS)
  {"prompt": "...", "completion": "...", "seed": S}              (from a prompt)

which prior_data.read_traces reads (it tokenizes with `kara tokenize`, so
bytes that are not UTF-8 come back as U+FFFD; `kara run` ends its output
with a newline, which falls in the last --distance tokens that are never
labelled).
"""
import argparse
import json
import os
import subprocess
import sys


def generate_one(kara, model, seed, tokens, temp, prompt="", ctx=0, threads=1, ignore_eos=False):
    """One sampled text from `kara run`. Returns (prompt, continuation); kara run echoes
    the prompt before the continuation, so it is cut off here."""
    cmd = [kara, "run", "-m", model, "--kv-method", "full", "-t", str(threads), "--temp", str(temp),
           "-n", str(tokens), "-s", str(seed), "--no-escape", "-p", prompt]
    if ctx:
        cmd += ["-c", str(ctx)]
    if ignore_eos:
        cmd.append("--ignore-eos")
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SystemExit(f"kara run (seed {seed}) failed with exit {r.returncode}: "
                         f"{err[-1] if err else 'no message'}")
    out = r.stdout.decode("utf-8", "replace")
    if prompt and out.startswith(prompt):
        out = out[len(prompt):]
    return prompt, out


def generate(kara, model, n, seed, tokens, temp, prompts=(), ctx=0, threads=1, ignore_eos=False, log=print):
    """N trace records (see the module's docstring), seeds seed .. seed+N-1."""
    if not kara or not os.path.exists(kara):
        raise SystemExit(f"self-generated traces need the kara binary (--kara, tried '{kara}')")
    if n < 1:
        raise SystemExit(f"--n must be at least 1, got {n}")
    recs = []
    for i in range(n):
        p = prompts[i % len(prompts)] if prompts else ""
        prompt, text = generate_one(kara, model, seed + i, tokens, temp, p, ctx, threads, ignore_eos)
        if prompt:
            recs.append({"prompt": prompt, "completion": text, "seed": seed + i})
        else:
            recs.append({"text": text, "prompt_tokens": 0, "seed": seed + i})
        if (i + 1) % 50 == 0 or i + 1 == n:
            log(f"  {i + 1}/{n} texts generated (seeds {seed}..{seed + i})")
    return recs


def write(recs, path):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="any GGUF `kara run` loads")
    ap.add_argument("--n", type=int, required=True, help="texts to generate")
    ap.add_argument("--seed", type=int, required=True, help="sampling seed of the first text (then +1 each)")
    ap.add_argument("--tokens", type=int, default=480, help="tokens generated per text")
    ap.add_argument("--temp", type=float, default=0.8)
    ap.add_argument("--prompt", action="append", default=[], help="a short neutral opening (repeatable; "
                    "the texts cycle through them); without one every text starts at BOS")
    ap.add_argument("--ctx", type=int, default=0, help="context size (0 = the model's)")
    ap.add_argument("--ignore-eos", action="store_true", help="generate --tokens tokens even past end of text")
    ap.add_argument("--kara", default=os.path.join(here, "..", "..", "build", "bin", "kara"))
    ap.add_argument("--out", required=True, help="the JSONL to write")
    a = ap.parse_args(argv)
    recs = generate(a.kara, a.model, a.n, a.seed, a.tokens, a.temp, a.prompt, a.ctx,
                    ignore_eos=a.ignore_eos, log=lambda s: print(s, file=sys.stderr))
    write(recs, a.out)
    print(f"wrote {len(recs)} traces to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
