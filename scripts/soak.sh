#!/usr/bin/env bash
# Ten minutes of 32 clients against promptcache serve with faults injected
# (Redis killed and restarted, disk segments corrupted, the disk filled):
# see scripts/soak.mjs for what it checks. Results: OUT/soak.json (and the
# table in docs/RELIABILITY.md). Needs a build (scripts/setup.sh), node and
# redis-server.
#   scripts/soak.sh [--seconds 600] [--clients 32] [--cycle 120] [--model M.gguf] [--out soak-out]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/promptcache
[ -x "$bin" ] || { echo "soak.sh: build first ($bin missing)" >&2; exit 1; }
model="$HOME/.cache/promptcache/bench-135m-q8_0.gguf"
out=soak-out
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) pass+=("$1" "$2"); shift 2 ;;
  esac
done
mkdir -p "$(dirname "$model")"
[ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model"
exec node scripts/soak.mjs --bin "$bin" --model "$model" --out "$out" "${pass[@]}"
