#!/usr/bin/env bash
# Scaled replay of a shared trace against our server, and the advisor's
# prediction for the same replay (issues 7, 8 and 31). Not a test: it takes
# up to a quarter of an hour on 2 cores. Prints:
#   - bench: measured cached-token fraction vs the ideal simulation (same capacity)
#   - advise: predicted vs measured TTFT p50, ITL p50 (over every gap, both
#     sides) and hit rate; PASS when the first two are within 20% and the
#     hit rate within 5 points. The advisor's prices: calibrate's, scaled to
#     the steps of a warm-up replay of other requests of the trace (another
#     offset of the sampling) against a server of its own (advise --steps);
#     two diagnostics beside it: calibrate's prices alone, and prices scaled
#     to the replay's own steps
#
#   scripts/replay_and_validate.sh [MODEL.gguf] [OUT_DIR]
# Env: TRACE (default ../shared/traces/mooncake_synthetic.jsonl), TOKEN_SCALE
# (0.03125: 512-token trace blocks become 16-token KV blocks), TIME_SCALE
# (0.7), LOAD (instead of TIME_SCALE: the compute demand wanted, as a share
# of one server by the advisor's costs, e.g. 0.4 moderate, 0.8 near
# saturation; the arrival times are scaled to give it: the warm-up by
# calibrate's prices, the replay by those its steps fitted), SAMPLE (13:
# every 13th request, spread over the trace's hour),
# REQUESTS (300), SKIP (0: lines to skip first), BLOCK_SIZE (16: the server's
# KV block; make it block_size x TOKEN_SCALE), PORT (18200), WARMUP (100:
# warm-up requests).
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-$HOME/.cache/promptcache/bench-135m-q8_0.gguf}"
out="${2:-replay-out}"
trace="${TRACE:-../shared/traces/mooncake_synthetic.jsonl}"
ts="${TOKEN_SCALE:-0.03125}" tm="${TIME_SCALE:-0.7}" sample="${SAMPLE:-13}" n="${REQUESTS:-300}" port="${PORT:-18200}"
skip="${SKIP:-0}" bs="${BLOCK_SIZE:-16}"
bin=build/promptcache
rm -rf "$out"; mkdir -p "$out"
[ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model"
"$bin" calibrate -m "$model" -o "$out/profile.json" >/dev/null
if [ -n "${LOAD:-}" ]; then  # utilization scales as 1 / time scale
  "$bin" advise --trace "$trace" --profile "$out/profile.json" --token-scale "$ts" --time-scale 1 --trace-sample "$sample" \
    --trace-skip "$skip" --max-requests "$n" --max-output-tokens 64 --json "$out/load.json" >/dev/null
  tm=$(python3 -c "import json,sys; u=json.load(open('$out/load.json'))['meta']['utilization_at_trace_rate']; print(u / float(sys.argv[1]))" "$LOAD")
  echo "LOAD=$LOAD: time scale $tm"
fi
server=""
trap '[ -z "$server" ] || kill $server 2>/dev/null || true' EXIT
start_server() {  # a fresh server (an empty cache) logging into $out/$1*
  "$bin" serve -m "$model" --port "$port" --block-size "$bs" --request-log "$out/$1requests.jsonl" \
    --step-log "$out/$1steps.jsonl" 2>"$out/$1serve.log" &
  server=$!
  for _ in $(seq 100); do grep -q listening "$out/$1serve.log" && break; sleep 0.2; done
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }
# Warm-up: other requests of the same hour (every 13th line from another
# offset), WARMUP of them, against their own server: its step log tells the
# advisor what steps cost on this machine with a client beside the server
# (advise --steps); the replay below is not used to price itself.
warm=(--token-scale "$ts" --time-scale "$tm" --trace-sample "$sample" --trace-skip "$((skip + sample / 2))")
start_server warmup-
"$bin" bench --url "http://127.0.0.1:$port" -w trace --trace "$trace" "${warm[@]}" --requests "${WARMUP:-100}" \
  --max-output-tokens 64 --warmup 2 --json "$out/warmup-bench.json" --no-progress >/dev/null
stop_server
if [ -n "${LOAD:-}" ]; then  # the load again, by the prices the warm-up's steps fitted
  "$bin" advise --trace "$trace" --profile "$out/profile.json" --steps "$out/warmup-steps.jsonl" --greedy --token-scale "$ts" \
    --time-scale 1 --trace-sample "$sample" --trace-skip "$skip" --max-requests "$n" --max-output-tokens 64 --json "$out/load.json" >/dev/null
  tm=$(python3 -c "import json,sys; u=json.load(open('$out/load.json'))['meta']['utilization_at_trace_rate']; print(u / float(sys.argv[1]))" "$LOAD")
  echo "LOAD=$LOAD by the warm-up's prices: time scale $tm"
fi
start_server ""
pool_tokens=$(curl -s "localhost:$port/metrics" | awk '/^promptcache_kv_pool_blocks\{state="total"\}/{b=$2} /^promptcache_kv_block_size_tokens /{s=$2} END{print b*s}')
common=(--token-scale "$ts" --time-scale "$tm" --trace-sample "$sample" --trace-skip "$skip")
"$bin" bench --url "http://127.0.0.1:$port" -w trace --trace "$trace" "${common[@]}" --requests "$n" \
  --max-output-tokens 64 --warmup 2 --json "$out/bench.json" --html "$out/bench.html" --no-progress | tee "$out/bench.txt"
stop_server
# bench asks for temperature 0: --greedy prices argmax, not a random draw, per row
adv=("$bin" advise --trace "$trace" --profile "$out/profile.json" "${common[@]}" --max-requests "$n" --greedy
     --max-output-tokens 64 --pool-tokens "$pool_tokens")
"${adv[@]}" --steps "$out/warmup-steps.jsonl" --json "$out/advise.json" --html "$out/advise.html" \
  --step-log "$out/advise-steps.jsonl" | tee "$out/advise.txt"
# Diagnostics, not judged: the calibrated prices alone, and prices fitted to
# this replay's own steps (what is left is the simulation, not the prices).
"${adv[@]}" --json "$out/advise-calibrated.json" >/dev/null
"${adv[@]}" --steps "$out/steps.jsonl" --json "$out/advise-own-steps.json" >/dev/null
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
b = json.load(open(f"{out}/bench.json")); a = json.load(open(f"{out}/advise.json"))
allg = next(g for g in b["groups"] if g["name"] == "all")
w = a["with_cache"]
m_ttft, p_ttft = allg["ttft_ms"]["p50"], w["ttft_ms"]["p50"]
m_itl, p_itl = allg["itl_ms"]["p50"], w["itl_ms"]["p50"]
m_hit, p_hit = b["meta"]["measured_cached_fraction"], w["cached_fraction"]
ideal = b["meta"].get("ideal_cached_fraction")
print(f"replay: {b['meta']['num_requests']} requests, errors {allg['num_errors']}, time scale {a['meta']['time_scale']}, "
      f"utilization {a['meta']['utilization_at_trace_rate']:.2f}")
print(f"cached fraction: measured {m_hit:.3f}, ideal simulation {ideal:.3f} ({(m_hit - ideal) * 100:+.1f} points)")
print(f"advisor vs measured: TTFT p50 {p_ttft:.1f} vs {m_ttft:.1f} ms ({(p_ttft / m_ttft - 1) * 100:+.1f}%), "
      f"ITL p50 {p_itl:.2f} vs {m_itl:.2f} ms ({(p_itl / m_itl - 1) * 100:+.1f}%), "
      f"hit rate {p_hit:.3f} vs {m_hit:.3f} ({(p_hit - m_hit) * 100:+.1f} points)")
for name, label in (("advise-calibrated", "calibrated prices alone"), ("advise-own-steps", "prices fitted to this replay's steps")):
    d = json.load(open(f"{out}/{name}.json"))["with_cache"]
    print(f"  diagnostic, {label}: TTFT p50 {d['ttft_ms']['p50']:.1f} ms ({(d['ttft_ms']['p50'] / m_ttft - 1) * 100:+.1f}%), "
          f"ITL p50 {d['itl_ms']['p50']:.2f} ms ({(d['itl_ms']['p50'] / m_itl - 1) * 100:+.1f}%)")
ok = (allg["num_errors"] == 0 and abs(p_ttft / m_ttft - 1) <= 0.2 and abs(p_itl / m_itl - 1) <= 0.2
      and abs(p_hit - m_hit) <= 0.05)
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
