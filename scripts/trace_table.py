#!/usr/bin/env python3
"""The Markdown table of `scripts/compare.sh trace`.

  trace_table.py OUT_DIR TRACE_NAME ARM...

Reads OUT_DIR/TRACE_NAME-ARM.json (promptcache bench --json) and, where the
server was ours, OUT_DIR/TRACE_NAME-ARM.metrics (its /metrics after the
replay): the mean and p90 step come from the step-time histogram (p90
interpolated inside its bucket), hits are requests with >= 90% of the prompt
cached, misses those with none.
"""
import json
import re
import sys


def step_stats(path):
    """(mean ms, p90 ms) of promptcache_step_seconds, or None."""
    try:
        text = open(path).read()
    except OSError:
        return None
    buckets = [(float("inf") if le == "+Inf" else float(le), float(c))
               for le, c in re.findall(r'promptcache_step_seconds_bucket\{le="([^"]+)"\} (\S+)', text)]
    total = re.search(r"promptcache_step_seconds_sum (\S+)", text)
    count = re.search(r"promptcache_step_seconds_count (\S+)", text)
    if not buckets or not total or not count or float(count.group(1)) == 0:
        return None
    n = float(count.group(1))
    lo, prev, p90 = 0.0, 0.0, float("nan")
    for le, c in buckets:
        if c >= 0.9 * n:
            p90 = lo if le == float("inf") else lo + (le - lo) * (0.9 * n - prev) / max(c - prev, 1e-9)
            break
        lo, prev = le, c
    return 1e3 * float(total.group(1)) / n, 1e3 * p90


def group(report, name):
    return next((g for g in report["groups"] if g["name"] == name), None)


def main():
    out, name, arms = sys.argv[1], sys.argv[2], sys.argv[3:]
    print("| server | ITL p50 | ITL p99 | TPOT p50 | TTFT p50 | TTFT p99 | output tok/s | cached (ideal) | wall "
          "| step mean / p90 | hits: n, TTFT p50 | misses: n, TTFT p50, p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for arm in arms:
        try:
            report = json.load(open(f"{out}/{name}-{arm}.json"))
        except OSError:
            print(f"| {arm} | failed: see {out}/{name}-{arm}.txt |")
            continue
        g = group(report, "all")
        ideal = report["meta"].get("ideal_cached_fraction")
        ideal = f" ({100 * ideal:.1f}%)" if ideal is not None else ""
        st = step_stats(f"{out}/{name}-{arm}.metrics")
        st = f"{st[0]:.0f} / {st[1]:.0f} ms" if st else "-"
        hit, miss = group(report, "hit"), group(report, "miss")
        hit = f"{hit['num_requests']}, {hit['ttft_ms']['p50']:,.0f} ms" if hit else "-"
        miss = f"{miss['num_requests']}, {miss['ttft_ms']['p50']:,.0f}, {miss['ttft_ms']['p99']:,.0f} ms" if miss else "-"
        print(f"| {arm} | {g['itl_ms']['p50']:.0f} ms | {g['itl_ms']['p99']:.0f} ms | {g['tpot_ms']['p50']:.0f} ms | "
              f"{g['ttft_ms']['p50']:,.0f} ms | {g['ttft_ms']['p99']:,.0f} ms | {g['throughput_tok_s']:.1f} | "
              f"{100 * g['cached_fraction']:.1f}%{ideal} | {report['meta']['wall_s']:.0f} s | {st} | {hit} | {miss} |")


if __name__ == "__main__":
    main()
