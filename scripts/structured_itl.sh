#!/usr/bin/env bash
# Issue 27's cost of structured output: ITL p50 of 8 concurrent streams on
# bench-135m (Q8_0), with a JSON schema and without, for promptcache and for
# the reference llama-server (its json_schema field) in one run, one server
# at a time on an otherwise idle machine. Prints a Markdown table.
#   scripts/structured_itl.sh [REQUESTS=48] [OUTPUT_TOKENS=128]
# Env: PROMPTCACHE_ANCHOR (default ../shared/anchor), PROMPTCACHE_ISA.
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-48}"
out_tokens="${2:-128}"
bin=build/promptcache
anchor="${PROMPTCACHE_ANCHOR:-../shared/anchor}"
out=$(mktemp -d /tmp/structured-itl.XXXXXX)
model="$out/../bench-135m-q8_0.gguf"
[ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model" >&2
# A schema that keeps the model inside a string for the whole reply (its
# minLength is beyond max_tokens), so both servers mask every token.
schema='{"type":"object","properties":{"title":{"type":"string","maxLength":40},"body":{"type":"string","minLength":2000}},"required":["title","body"],"additionalProperties":false}'
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
    --output-tokens "$out_tokens" --warmup 8 --no-progress --json "$out/$1.json" ${3:+--extra-body "$3"} >/dev/null
  python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["groups"][0]; print(g["itl_ms"]["p50"], g["num_errors"])' "$out/$1.json"
}
declare -A itl
for server in promptcache reference; do
  p=$(port)
  if [ "$server" = promptcache ]; then
    "$bin" serve -m "$model" --host 127.0.0.1 --port "$p" -t 2 >"$out/$server.log" 2>&1 &
    constrained="{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"doc\",\"schema\":$schema}}}"
  else
    LD_LIBRARY_PATH="$anchor" "$anchor/llama-server" -m "$model" --host 127.0.0.1 --port "$p" -t 2 -np 8 -c 16384 \
      >"$out/$server.log" 2>&1 &
    constrained="{\"json_schema\":$schema}"
  fi
  pid=$!
  wait_health "$p"
  read -r itl["$server-plain"] err1 < <(run_arm "$server-plain" "$p" "")
  read -r itl["$server-schema"] err2 < <(run_arm "$server-schema" "$p" "$constrained")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  [ "$err1" = 0 ] && [ "$err2" = 0 ] || { echo "$server: request errors ($err1, $err2); see $out" >&2; exit 1; }
done
echo "| server | ITL p50 without schema (ms) | with schema (ms) | cost |"
echo "|---|---:|---:|---:|"
for server in promptcache reference; do
  python3 -c 'import sys; n,a,b=sys.argv[1],float(sys.argv[2]),float(sys.argv[3]); print(f"| {n} | {a:.2f} | {b:.2f} | {b/a-1:+.1%} |")' \
    "$server" "${itl[$server-plain]}" "${itl[$server-schema]}"
done
echo "(requests $requests per arm, 8 in flight, $out_tokens output tokens, 64-token prompts; raw results in $out)"
