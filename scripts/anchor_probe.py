#!/usr/bin/env python3
"""Our logprobs against the reference engine's on any GGUF file, at every ISA
level: for files no reference was recorded for (other shapes of a family,
other window sizes, expert counts or rope scalings).

The reference is ../shared/anchor's llama-server (started on a free port,
greedy /completion with n_probs 10); ours is `run --temp 0 --logprobs 10
--json` with PROMPTCACHE_ISA set per level. While both pick the same tokens
the contexts are equal, so the |difference| of the reference's top-10
logprobs there measures the arithmetic alone; at the first differing pick
the case stops and the reference's top-1/top-2 gap is printed (a near-tie
is allowed, a wide gap is a bug). One line per level; exit status 1 if any
level's largest difference is over --tol.

--set KEY=TYPE:VALUE (TYPE u32, i32, f32, bool or str; repeatable) probes a
copy of the file with those metadata values set or added (tensors as they
are): a window of 16 on a Gemma file, two experts used of eight, another
YaRN factor.

usage: scripts/anchor_probe.py [--numerics ggml|precise] [--tol 0.03]
       [--isa scalar,avx2,avxvnni,avx512] [--set K=T:V ...] MODEL.gguf
"""
import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# Token ids below 512 (the shared tiny models' vocabularies): a 71-token
# prompt runs past their 32-position windows before the first pick.
PROMPTS = [[1] + [(i * 37) % 500 + 3 for i in range(70)], [1, 50, 60, 70, 80, 90], [1, 7, 7, 7, 300, 301, 302, 7],
           [1] + list(range(400, 418))]
NEW_TOKENS = 24

# GGUF value types (the specification's numbering) and their struct codes.
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


def read(f, fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))


def read_value(f, vtype):
    if vtype == STRING:
        (n,) = read(f, "Q")
        return f.read(n)
    if vtype == ARRAY:
        etype, n = read(f, "IQ")
        return etype, [read_value(f, etype) for _ in range(n)]
    return read(f, SCALAR[vtype])[0]


def write_value(out, vtype, value):
    if vtype == STRING:
        out.write(struct.pack("<Q", len(value)) + value)
    elif vtype == ARRAY:
        etype, items = value
        out.write(struct.pack("<IQ", etype, len(items)))
        for item in items:
            write_value(out, etype, item)
    else:
        out.write(struct.pack("<" + SCALAR[vtype], value))


KINDS = {"u32": (4, int), "i32": (5, int), "f32": (6, float), "bool": (7, lambda s: s in ("1", "true")),
         "str": (STRING, str.encode)}


def parse_set(arg):
    """KEY=TYPE:VALUE -> (key bytes, GGUF type, value); ValueError with the reason."""
    key, eq, typed = arg.partition("=")
    kind, colon, text = typed.partition(":")
    if not key or not eq or not colon or kind not in KINDS:
        raise ValueError("--set %r: expected KEY=TYPE:VALUE with TYPE one of %s" % (arg, ", ".join(KINDS)))
    vtype, convert = KINDS[kind]
    try:
        return key.encode(), vtype, convert(text)
    except ValueError:
        raise ValueError("--set %r: %r is not a %s" % (arg, text, kind)) from None


def write_variant(src, dst, sets):
    """A copy of src with metadata values set: header, keys and tensor infos
    rewritten, the tensor data copied after the alignment padding (tensor
    offsets are relative to the data's start, so they stay)."""
    with open(src, "rb") as f:
        magic, version, n_tensors, n_kv = read(f, "4sIQQ")
        if magic != b"GGUF":
            raise ValueError("%s is not a GGUF file" % src)
        kvs = []
        for _ in range(n_kv):
            (n,) = read(f, "Q")
            key = f.read(n)
            (vtype,) = read(f, "I")
            kvs.append([key, vtype, read_value(f, vtype)])
        infos = []
        for _ in range(n_tensors):
            (n,) = read(f, "Q")
            name = f.read(n)
            (n_dims,) = read(f, "I")
            dims = read(f, "Q" * n_dims)
            infos.append((name, dims, read(f, "IQ")))
        align = next((v for k, t, v in kvs if k == b"general.alignment"), 32)
        f.seek((f.tell() + align - 1) // align * align)
        data = f.read()
    for key, vtype, value in sets:
        match = [kv for kv in kvs if kv[0] == key]
        if match:
            match[0][1:] = [vtype, value]
        else:
            kvs.append([key, vtype, value])
    with open(dst, "wb") as out:
        out.write(struct.pack("<4sIQQ", magic, version, n_tensors, len(kvs)))
        for key, vtype, value in kvs:
            out.write(struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype))
            write_value(out, vtype, value)
        for name, dims, (ttype, offset) in infos:
            out.write(struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims)))
            out.write(struct.pack("<" + "Q" * len(dims), *dims) + struct.pack("<IQ", ttype, offset))
        pad = -out.tell() % align
        out.write(b"\0" * pad + data)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))


def reference_steps(anchor, model):
    """Per prompt: [(picked id, {id: logprob} of the top 10)], or None where
    the reference server refused the case."""
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=anchor)
    server = subprocess.Popen([os.path.join(anchor, "llama-server"), "-m", model, "--port", str(port), "-t", "2", "-c",
                               "2048"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = "http://127.0.0.1:%d" % port
    try:
        for _ in range(300):
            if server.poll() is not None:
                return [None] * len(PROMPTS)  # it refused the file and exited
            try:
                urllib.request.urlopen(base + "/health", timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        cases = []
        for prompt in PROMPTS:
            body = {"prompt": prompt, "n_predict": NEW_TOKENS, "n_probs": 10, "temperature": 0, "ignore_eos": True}
            steps = None
            for _ in range(20):  # 503 while the model loads
                try:
                    reply = post(base + "/completion", body)
                    steps = [(s["id"], {t["id"]: t["logprob"] for t in s["top_logprobs"]})
                             for s in reply["completion_probabilities"]]
                    break
                except urllib.error.HTTPError as e:
                    if e.code != 503:
                        break  # e.g. its reply parser refusing the text: skip the case
                    time.sleep(0.2)
                except (urllib.error.URLError, ConnectionError):
                    break  # the server is gone
            cases.append(steps)
        return cases
    finally:
        server.kill()
        server.wait()


def our_steps(binary, model, isa, numerics):
    env = dict(os.environ, PROMPTCACHE_ISA=isa)
    cases = []
    for prompt in PROMPTS:
        out = subprocess.run([binary, "run", "-m", model, "--prompt-tokens", ",".join(map(str, prompt)), "-n",
                              str(NEW_TOKENS), "--logprobs", "10", "--ignore-eos", "--json", "--temp", "0",
                              "--numerics", numerics], capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            return "failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        cases.append([(r["id"], {t[0]: t[1] for t in r["top"]}) for r in rows])
    return cases


def compare(reference, ours):
    worst, steps, notes = 0.0, 0, []
    for case, (ref, got) in enumerate(zip(reference, ours)):
        if ref is None:
            continue
        for i, ((ref_id, ref_top), (our_id, our_top)) in enumerate(zip(ref, got)):
            worst = max([worst] + [abs(our_top[t] - lp) for t, lp in ref_top.items() if t in our_top])
            steps += 1
            if ref_id != our_id:
                top = sorted(ref_top.values(), reverse=True)
                notes.append("case %d step %d picked apart (reference gap %.3g)" % (case, i, top[0] - top[1]))
                break
    return worst, steps, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--binary", default="build/promptcache")
    ap.add_argument("--anchor", default="../shared/anchor")
    ap.add_argument("--numerics", default="ggml", choices=["ggml", "precise"])
    ap.add_argument("--isa", default="scalar,avx2,avxvnni,avx512")
    ap.add_argument("--tol", type=float, default=3e-2)
    ap.add_argument("--set", action="append", default=[], help="KEY=TYPE:VALUE")
    args = ap.parse_args()
    binary, anchor = os.path.abspath(args.binary), os.path.abspath(args.anchor)
    for path, what in ((binary, "--binary"), (os.path.join(anchor, "llama-server"), "--anchor's llama-server"),
                       (args.model, "the model")):
        if not os.path.isfile(path):
            ap.error("%s: no file %s" % (what, path))
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if args.set:
            model = os.path.join(tmp, "variant.gguf")
            try:
                write_variant(args.model, model, [parse_set(s) for s in args.set])
            except (ValueError, struct.error) as e:
                ap.error(str(e) if isinstance(e, ValueError) else "%s: a truncated GGUF file" % args.model)
        reference = reference_steps(anchor, model)
        if all(case is None for case in reference):
            print("the reference server gave no completion for %s (does it load the file?)" % args.model)
            return 1
        label = os.path.basename(args.model) + "".join(" " + s for s in args.set)
        over = False
        for isa in args.isa.split(","):
            ours = our_steps(binary, model, isa, args.numerics)
            if isinstance(ours, str):
                print("%s %s %s" % (label, isa, ours))
                over = True
                continue
            worst, steps, notes = compare(reference, ours)
            over |= worst > args.tol
            print("%s %s: max |logprob diff| %.4f over %d steps%s %s" % (label, isa, worst, steps,
                  " OVER" if worst > args.tol else "", "; ".join(notes)))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
