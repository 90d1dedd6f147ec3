#!/usr/bin/env python3
"""What each routing of docs/DEPLOY.md could reach on a trace with prefix ids.

Replays the requests `promptcache bench -w trace` would send (same sampling:
every Nth request, the first M, token scale) through ideal LRU prefix caches,
block by block, with no timing: a block counts as cached if any earlier
request computed it and it is still held. That is an upper bound for every
arm of scripts/deploy_bench.sh at the same KV memory:

  one pool     one server with all the memory
  prefix       2 replicas, half the memory each, a request's replica chosen
               by its first block (what the prefix-key hash does)
  round robin  2 replicas, alternating
  + shared     every computed block also written to one shared LRU tier
               (Redis) that a replica loads from when its own pool lacks it

  scripts/routing_ideal.py [--trace F] [--sample 4] [--requests 999]
      [--token-scale 0.015625] [--pool-gib 1] [--shared-gib 1]
      [--kv-bytes-per-token 23040]
The default KV size is bench-135m's: 30 layers x 3 KV heads x 64 x (K, V)
x 2 bytes (F16).
"""
import argparse
import json
from collections import OrderedDict


class Lru:
    """Block keys with a capacity in blocks (0: unbounded)."""

    def __init__(self, capacity):
        self.keys = OrderedDict()
        self.capacity = capacity

    def __contains__(self, key):
        return key in self.keys

    def add(self, key):
        self.keys[key] = True
        self.keys.move_to_end(key)
        while self.capacity and len(self.keys) > self.capacity:
            self.keys.popitem(last=False)


def requests(path, sample, limit, scale):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    picked = lines[::sample][:limit] if limit else lines[::sample]
    for r in picked:
        tokens = max(1, round(r["input_tokens"] * scale))
        blocks = r.get("prefix_blocks") or []
        # A block key is the chain of ids up to it: two prompts share block
        # k exactly when their lists agree on the first k entries.
        yield tokens, [tuple(blocks[: i + 1]) for i in range(len(blocks))]


def replay(reqs, block_tokens, replicas, pool_blocks, route, shared_blocks=None):
    pools = [Lru(pool_blocks) for _ in range(replicas)]
    shared = Lru(shared_blocks) if shared_blocks is not None else None
    cached = total = 0
    for i, (tokens, keys) in enumerate(reqs):
        if route == "roundrobin":
            pool = pools[i % replicas]
        else:
            pool = pools[hash(keys[0]) % replicas if keys else 0]
        hits = 0
        for key in keys:
            if key in pool or (shared is not None and key in shared):
                hits += 1
            else:
                break
        cached += min(hits * block_tokens, tokens)
        total += tokens
        for key in keys:
            pool.add(key)
            if shared is not None:
                shared.add(key)
    return cached / total if total else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="../shared/traces/mooncake_synthetic.jsonl")
    ap.add_argument("--sample", type=int, default=4)
    ap.add_argument("--requests", type=int, default=999)
    ap.add_argument("--token-scale", type=float, default=1 / 64)
    ap.add_argument("--trace-block", type=int, default=512, help="tokens per prefix id in the trace")
    ap.add_argument("--pool-gib", type=float, default=1.0, help="KV memory of each replica")
    ap.add_argument("--shared-gib", type=float, default=1.0, help="the shared tier's memory")
    ap.add_argument("--kv-bytes-per-token", type=int, default=30 * 3 * 64 * 2 * 2)
    a = ap.parse_args()
    block_tokens = max(1, round(a.trace_block * a.token_scale))
    gib_blocks = lambda gib: int(gib * (1 << 30) / (a.kv_bytes_per_token * block_tokens))
    reqs = list(requests(a.trace, a.sample, a.requests, a.token_scale))
    pool = gib_blocks(a.pool_gib)
    shared = gib_blocks(a.shared_gib)
    arms = [
        ("unbounded cache", replay(reqs, block_tokens, 1, 0, "prefix")),
        (f"one pool ({2 * a.pool_gib:g} GiB)", replay(reqs, block_tokens, 1, 2 * pool, "prefix")),
        ("prefix, 2 replicas", replay(reqs, block_tokens, 2, pool, "prefix")),
        ("prefix + shared tier", replay(reqs, block_tokens, 2, pool, "prefix", shared)),
        ("round robin", replay(reqs, block_tokens, 2, pool, "roundrobin")),
        ("round robin + shared tier", replay(reqs, block_tokens, 2, pool, "roundrobin", shared)),
    ]
    print(f"{len(reqs)} requests, {sum(t for t, _ in reqs)} prompt tokens, {block_tokens}-token blocks, "
          f"{a.pool_gib:g} GiB per replica, shared tier {a.shared_gib:g} GiB")
    for name, share in arms:
        print(f"  {name:28s} {100 * share:5.1f}%")
    share = dict(arms)
    for base in ("round robin", "round robin + shared tier"):
        print(f"  prefix + shared tier / {base}: {share['prefix + shared tier'] / share[base]:.2f}x")


if __name__ == "__main__":
    main()
