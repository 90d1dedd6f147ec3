#!/usr/bin/env python3
"""Top-10 logprob differences of 8-bit K/V against F16 K/V (issue 29's quality
statement): `run --numerics precise --logprobs 10 --json` once per K/V type on
each model, the same prompt and greedy tokens; over the steps both runs share
(identical tokens so far), the |difference| of every top-10 token's logprob
that both report. Prints one line per model: mean, max, steps compared.

usage: scripts/kv_quality.py [--binary build/promptcache] [-n 32] MODEL.gguf...
"""
import argparse
import json
import subprocess
import sys

PROMPT = ("The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, "
          "there lived an old fisherman who told stories to the children every evening.")


def run(binary, model, kv, n):
    out = subprocess.run([binary, "run", "-m", model, "-p", PROMPT, "-n", str(n), "--ignore-eos", "--logprobs", "10",
                          "--numerics", "precise", "--kv-type", kv, "--json"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/promptcache")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    for model in a.models:
        f16, err = run(a.binary, model, "f16", a.n)
        q8, err8 = run(a.binary, model, "q8_0", a.n)
        if f16 is None or q8 is None:
            print(f"{model}: refused or failed: {(err or err8)[0]}")
            continue
        diffs, steps = [], 0
        for x, y in zip(f16, q8):
            top_x = dict((t, lp) for t, lp in x["top"])
            diffs += [abs(top_x[t] - lp) for t, lp in y["top"] if t in top_x]
            steps += 1
            if x["id"] != y["id"]:
                break
        mean = sum(diffs) / len(diffs) if diffs else 0.0
        print(f"{model}: mean {mean:.4f} max {max(diffs, default=0):.4f} over {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
