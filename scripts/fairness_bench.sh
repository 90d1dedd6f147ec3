#!/usr/bin/env bash
# Two tenants on one server, one flooding at 10x the other's rate: the quiet
# tenant's TTFT alone, beside the flood (two API keys, two tenants), and
# beside the same flood sent under the quiet tenant's own key (one tenant:
# first come, first served). docs/BENCHMARKS.md.
#   scripts/fairness_bench.sh [--rate R] [--seconds S] [--out DIR]
# Quiet: R chat requests/s (256-token prompts, 16 output tokens); flood: 10 R.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/promptcache
rate=0.5 seconds=80 out=fairness-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "fairness_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
model="$HOME/.cache/promptcache/bench-135m-q8_0.gguf"
[ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model"
printf 'quiet-key quiet\nflood-key flood\n' >"$out/keys.txt"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve -m "$model" --host 127.0.0.1 --port "$port" -t 2 --api-key-file "$out/keys.txt" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null || true' EXIT
until curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null; do sleep 0.3; done

load() {  # KEY RATE SEED JSON
  "$bin" bench --url "http://127.0.0.1:$port" --api-key "$1" -w chat --prompt-tokens 256 --output-tokens 16 \
    --rate "$2" --duration "$seconds" --requests 100000 --seed "$3" --no-progress --json "$4" >"${4%.json}.txt" 2>&1
}
flood_rate=$(python3 -c "print(10 * $rate)")
load quiet-key "$rate" 1 "$out/quiet-alone.json"
load flood-key "$flood_rate" 2 "$out/flood-two-tenants.json" &
load quiet-key "$rate" 3 "$out/quiet-two-tenants.json"
wait $!
load quiet-key "$flood_rate" 4 "$out/flood-one-tenant.json" &
load quiet-key "$rate" 5 "$out/quiet-one-tenant.json"
wait $!

python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
print("| run | quiet TTFT p50 | quiet TTFT p99 | quiet requests | flood requests | flood TTFT p50 |")
print("|---|---:|---:|---:|---:|---:|")
def g(name):
    j = json.load(open(f"{out}/{name}.json"))
    return next(x for x in j["groups"] if x["name"] == "all")
for label, q, f in [("quiet alone", "quiet-alone", None), ("with a flood, two tenants", "quiet-two-tenants", "flood-two-tenants"),
                    ("with a flood, one tenant (FIFO)", "quiet-one-tenant", "flood-one-tenant")]:
    a = g(q)
    fl = g(f) if f else None
    print(f"| {label} | {a['ttft_ms']['p50']:,.0f} ms | {a['ttft_ms']['p99']:,.0f} ms | {a['num_requests']} | "
          f"{fl['num_requests'] if fl else '-'} | {format(fl['ttft_ms']['p50'], ',.0f') + ' ms' if fl else '-'} |")
EOF
