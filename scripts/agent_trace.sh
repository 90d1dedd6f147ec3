#!/usr/bin/env bash
# The agent trace (scripts/agent_trace.py: a ~1,500-token system prompt, ten
# tools, 20 turns of calls and results) against promptcache serve and the
# reference's llama-server (its prompt cache on, --jinja), one after the
# other, on the same model and chat template, 2 threads each. Prints each
# turn and a table: TTFT p50 from turn 2 on, the smallest cached share from
# turn 2 on, and the ratio ours / reference.
#
#   scripts/agent_trace.sh [--model F.gguf] [--template F.jinja] [--turns N] [--no-reference]
#
# Default model: bench-135m Q8_0 (made once into ~/.cache/promptcache);
# default template: Qwen 2.5's (Hermes <tool_call> tags) from ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/promptcache
anchor="${PROMPTCACHE_ANCHOR:-../shared/anchor}"
cache="${PROMPTCACHE_CACHE:-$HOME/.cache/promptcache}"
model="" template="../shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja" turns=20 reference=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --template) template="$2"; shift 2 ;;
    --turns) turns="$2"; shift 2 ;;
    --no-reference) reference=0; shift ;;
    *) echo "agent_trace.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "agent_trace.sh: build first ($bin missing)" >&2; exit 1; }
[ -f "$template" ] || { echo "agent_trace.sh: template $template not found" >&2; exit 1; }
if [ -z "$model" ]; then
  mkdir -p "$cache"
  model="$cache/bench-135m-q8_0.gguf"
  [ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model" >&2
fi
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

wait_up() {  # port
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "agent_trace.sh: server on port $1 did not start" >&2; return 1
}

run_arm() {  # label port
  python3 scripts/agent_trace.py --url "http://127.0.0.1:$2" --turns "$turns" --label "$1" | tee "$out/$1.jsonl" >&2
}

port=18731
"$bin" serve -m "$model" --chat-template-file "$template" --port $port -t 2 -c 16384 ${PC_SERVE_ARGS:-} >"$out/ours.log" 2>&1 &
wait_up $port
run_arm promptcache $port
kill %1; wait %1 2>/dev/null || true
if [ "$reference" = 1 ]; then
  port=18732
  LD_LIBRARY_PATH="$anchor" "$anchor/llama-server" -m "$model" --jinja --chat-template-file "$template" \
    --host 127.0.0.1 --port $port -t 2 -c 16384 -np 1 --override-kv llama.context_length=int:16384 >"$out/reference.log" 2>&1 &
  wait_up $port
  run_arm reference $port
  kill %2 2>/dev/null || kill $(jobs -p) 2>/dev/null || true
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(basename "$model"), $(basename "$template"), $turns turns"
python3 - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
s = {}
for arm in ("promptcache", "reference"):
    p = os.path.join(d, arm + ".jsonl")
    if os.path.exists(p):
        for line in open(p):
            j = json.loads(line)
            if "summary" in j:
                s[arm] = j["summary"]
print("| server | prompt tokens (turn 1 / 20) | TTFT turn 1 (ms) | TTFT p50, turns 2+ (ms) | least cached share, turns 2+ |")
print("|---|---|---|---|---|")
for arm, v in s.items():
    print(f"| {arm} | {v['first_prompt_tokens']} / {v['last_prompt_tokens']} | {v['ttft_ms_turn1']:.1f} | {v['ttft_ms_p50_turn2on']:.1f} | {v['min_cached_share_turn2on']:.1%} |")
if len(s) == 2:
    print(f"\nTTFT p50 turns 2+, ours / reference: {s['promptcache']['ttft_ms_p50_turn2on'] / s['reference']['ttft_ms_p50_turn2on']:.2f}x")
PY
