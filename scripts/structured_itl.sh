#!/usr/bin/env bash
# Issue 27's cost of structured output: ITL p50 of 8 concurrent streams on
# bench-135m (Q8_0), with a JSON schema and without, for promptcache and for
# the reference llama-server (its json_schema field) in one run, one server
# at a time on an otherwise idle machine. Prints a Markdown table.
#   scripts/structured_itl.sh [REQUESTS=48] [OUTPUT_TOKENS=64]
# Env: PROMPTCACHE_ANCHOR (default ../shared/anchor), PROMPTCACHE_ISA.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-48}"
out_tokens="${2:-64}"
bin=build/promptcache
anchor="${PROMPTCACHE_ANCHOR:-../shared/anchor}"
out=$(mktemp -d /tmp/structured-itl.XXXXXX)
model="$out/../bench-135m-q8_0.gguf"
[ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model" >&2
# A list of at least 20 records: it cannot close within the replies'
# tokens, so constrained replies are as long as plain ones (the same batch
# sizes) and both servers mask every token.
schema='{"type":"array","minItems":20,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"}},"required":["name","n"],"additionalProperties":false}}'
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_health() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server on port $1 did not start" >&2
  return 1
}
run_arm() {  # NAME PORT EXTRA_BODY
  "$bin" bench --url "http://127.0.0.1:$2" -w chat --requests "$requests" -c 8 --prompt-tokens 64 \
    --output-tokens "$out_tokens" --warmup 8 --no-progress --json "$out/$1.json" ${3:+--extra-body "$3"} >/dev/null || true  # failed requests are counted below
  python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["groups"][0]; print(g["itl_ms"]["p50"], g["num_errors"])' "$out/$1.json"
}
declare -A itl errors
for server in promptcache reference; do
  p=$(port)
  if [ "$server" = promptcache ]; then
    "$bin" serve -m "$model" --host 127.0.0.1 --port "$p" -t 2 >"$out/$server.log" 2>&1 &
    constrained="{\"ignore_eos\":false,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"doc\",\"schema\":$schema}}}"
  else
    LD_LIBRARY_PATH="$anchor" "$anchor/llama-server" -m "$model" --host 127.0.0.1 --port "$p" -t 2 -np 8 -c 16384 \
      >"$out/$server.log" 2>&1 &
    constrained="{\"ignore_eos\":false,\"json_schema\":$schema}"
  fi
  pid=$!
  wait_health "$p"
  # Three rounds, the two arms alternating; the median round per arm (one
  # run's ITL on a shared 2-core guest varies by tens of percent).
  for arm in plain schema; do itl["$server-$arm"]=""; errors["$server-$arm"]=0; done
  for round in 1 2 3; do
    for arm in plain schema; do
      extra=""
      [ "$arm" = schema ] && extra="$constrained"
      read -r v e < <(run_arm "$server-$arm-$round" "$p" "$extra")
      itl["$server-$arm"]+="$v "
      errors["$server-$arm"]=$((errors["$server-$arm"] + e))
    done
  done
  for arm in plain schema; do
    itl["$server-$arm"]=$(python3 -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' ${itl[$server-$arm]})
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
echo "| server | ITL p50 without schema (ms) | with schema (ms) | cost | failed requests (plain, schema) |"
echo "|---|---:|---:|---:|---|"
for server in promptcache reference; do
  python3 -c 'import sys; n,a,b,e1,e2=sys.argv[1:]; a,b=float(a),float(b); print(f"| {n} | {a:.2f} | {b:.2f} | {b/a-1:+.1%} | {e1}, {e2} |")' \
    "$server" "${itl[$server-plain]}" "${itl[$server-schema]}" "${errors[$server-plain]}" "${errors[$server-schema]}"
done
echo "(median of 3 alternating rounds of $requests requests per arm, 8 in flight, $out_tokens output tokens, 64-token prompts; raw results in $out)"
