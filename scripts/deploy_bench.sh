#!/usr/bin/env bash
# The deployment comparison of docs/DEPLOY.md: `promptcache bench -w trace`
# through HAProxy with 2 replicas of 1 thread (prefix affinity, round robin
# with and without the shared Redis tier) against one server with 2 threads
# and the same total KV memory, on a shared trace; then a replica killed
# mid-replay. Each arm starts a fresh cluster (empty caches, empty Redis).
#   scripts/deploy_bench.sh [--trace F] [--out DIR] [--kill-at S] [--arms "single prefix ..."] [-- BENCH_ARGS...]
# Default bench arguments: the Mooncake trace, every 4th request (999), token
# scale 1/64 (served with 8-token blocks, the trace's block at that scale),
# 16 output tokens, replayed 8x faster (open loop: each request at its
# arrival time).
set -euo pipefail
cd "$(dirname "$0")/.."
trace=../shared/traces/mooncake_synthetic.jsonl
out=deploy-bench
port=18080
kill_at=60
arms="single prefix roundrobin roundrobin-no-redis prefix-kill"
kv_mem=$((1 << 30))
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --trace) trace="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --kill-at) kill_at="$2"; shift 2 ;;
    --arms) arms="$2"; shift 2 ;;
    --) shift; bench_args=("$@"); break ;;
    *) echo "deploy_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#bench_args[@]} -gt 0 ] || bench_args=(--trace-sample 4 --requests 999 --token-scale 0.015625 --max-output-tokens 16
  --speed 8)
mkdir -p "$out"
bin=build/promptcache
name=$(basename "$trace" .jsonl)

arm() {  # NAME REPLICAS THREADS PORT_OFFSET(0 prefix, 1 round robin) KV_BYTES_EACH [kill|no-redis]
  local arm=$1 replicas=$2 threads=$3 entry=$((port + $4)) mem=$5 kill="" tier=()
  [ "${6:-}" = kill ] && kill=1
  [ "${6:-}" = no-redis ] && tier=(--no-redis)
  scripts/cluster.sh up --replicas "$replicas" --threads-each "$threads" --port "$port" --dir "$out/run" \
    --kv-cache-mem "$mem" --serve-arg --block-size --serve-arg 8 "${tier[@]}" >/dev/null
  date +%s.%N >"$out/$name-$arm.started_at"
  "$bin" bench --url "http://127.0.0.1:$entry" -w trace --trace "$trace" "${bench_args[@]}" --no-progress \
    --json "$out/$name-$arm.json" >"$out/$name-$arm.txt" 2>&1 &
  local bench_pid=$!
  if [ -n "$kill" ]; then
    sleep "$kill_at"
    date +%s.%N >"$out/$name-$arm.killed_at"
    scripts/cluster.sh kill-replica 1 --dir "$out/run"
  fi
  wait "$bench_pid" || true  # a run with failed requests still reports
  for ((i = 0; i < replicas; i++)); do
    curl -s "http://127.0.0.1:$((port + 10 + i))/metrics" >"$out/$name-$arm-replica-$i.metrics" || true
  done
  scripts/cluster.sh down --dir "$out/run" >/dev/null
}

for a in $arms; do
  case "$a" in
    single) arm single 1 2 0 $((2 * kv_mem)) ;;
    prefix) arm prefix 2 1 0 "$kv_mem" ;;
    roundrobin) arm roundrobin 2 1 1 "$kv_mem" ;;
    roundrobin-no-redis) arm roundrobin-no-redis 2 1 1 "$kv_mem" no-redis ;;
    prefix-kill) arm prefix-kill 2 1 0 "$kv_mem" kill ;;
    *) echo "deploy_bench.sh: unknown arm $a" >&2; exit 2 ;;
  esac
done

python3 - "$out" "$name" <<'EOF'
# One table: cached share (and the part of it that came from Redis), TTFT and
# ITL percentiles, failed requests; for the kill arm, failures among the
# requests that started after HAProxy's checks could have noticed (2 x 1 s).
import json, os, sys
out, name = sys.argv[1], sys.argv[2]
print(f"| {name} | cached share | from Redis | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | failed | wall |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for arm in ["single", "prefix", "roundrobin", "roundrobin-no-redis", "prefix-kill"]:
    path = f"{out}/{name}-{arm}.json"
    if not os.path.exists(path):
        continue
    j = json.load(open(path))
    g = next(g for g in j["groups"] if g["name"] == "all")
    reqs = j["requests"]
    prompt = sum(r["prompt_tokens"] for r in reqs if r["ok"])
    redis = sum(r["cached_by_tier"].get("redis", 0) for r in reqs if r["ok"])
    failed = f"{g['num_errors']}"
    if os.path.exists(f"{out}/{name}-{arm}.killed_at"):
        t0 = float(open(f"{out}/{name}-{arm}.started_at").read())
        kill = float(open(f"{out}/{name}-{arm}.killed_at").read()) - t0
        late = [r for r in reqs if r["start_s"] > kill + 2.5]
        broken = [r for r in reqs if not r["ok"] and r["start_s"] <= kill]
        failed += (f" ({len(broken)} streams running at the kill; "
                   f"{sum(not r['ok'] for r in late)} of {len(late)} started > 2.5 s after it)")
    print(f"| {arm} | {100 * g['cached_fraction']:.1f}% | {100 * redis / max(prompt, 1):.1f}% | "
          f"{g['ttft_ms']['p50']:.0f} ms | {g['ttft_ms']['p99']:.0f} ms | "
          f"{g['itl_ms']['p50']:.0f} ms | {g['itl_ms']['p99']:.0f} ms | {failed} | {j['meta']['wall_s']:.0f} s |")
EOF
