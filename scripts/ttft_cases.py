#!/usr/bin/env python3
"""TTFT at each cache outcome against one OpenAI-compatible server (ours or
the reference), for scripts/compare.sh server.

Per repetition, with fresh random token-id prompts (the same ids for every
server, seeded by the repetition):
  cold     a TOTAL-token prompt the server has never seen
  repeated the same prompt again (a full hit)
  prime    a CACHED-token prompt, then
  partial  that prompt plus NEW tokens (a partial hit)
Each request streams /v1/completions (temperature 0, 16 tokens, EOS
ignored). TTFT is measured here: request sent to the first chunk with a
choice; ITL is the mean gap between later chunks. Medians over repetitions
go to --json.
"""
import argparse
import http.client
import json
import random
import statistics
import time
import urllib.parse


def prompt_ids(n, seed):
    rng = random.Random(seed)
    return [1] + [rng.randrange(300, 30000) for _ in range(n - 1)]


def stream(url, ids, max_tokens=16):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"prompt": ids, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    times, usage = [], {}
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        j = json.loads(data)
        if j.get("choices"):
            times.append(time.perf_counter())
        if j.get("usage"):
            usage = j["usage"]
    conn.close()
    if not times:
        raise RuntimeError("no token came back")
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"ttft_ms": 1e3 * (times[0] - t0), "itl_ms": 1e3 * statistics.mean(gaps) if gaps else 0.0,
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=4266)
    ap.add_argument("--cached", type=int, default=4000)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    runs = {"cold": [], "repeated": [], "partial": []}
    for r in range(a.reps):
        full = prompt_ids(a.prompt_tokens, 1000 + r)
        runs["cold"].append(stream(a.url, full))
        runs["repeated"].append(stream(a.url, full))
        base = prompt_ids(a.cached, 2000 + r)
        stream(a.url, base)  # prime: the cached part
        runs["partial"].append(stream(a.url, base + prompt_ids(a.new + 1, 3000 + r)[1:]))
        print(f"rep {r + 1}: " + ", ".join(f"{k} {v[-1]['ttft_ms']:.1f} ms" for k, v in runs.items()), flush=True)
    cases = {}
    for k, v in runs.items():
        cases[k] = {m: statistics.median(x[m] for x in v) for m in ("ttft_ms", "itl_ms", "prompt_tokens", "cached_tokens")}
        cases[k]["prompt_tokens"] = int(cases[k]["prompt_tokens"])
        cases[k]["cached_tokens"] = int(cases[k]["cached_tokens"])
    json.dump({"url": a.url, "reps": a.reps, "cases": cases}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
