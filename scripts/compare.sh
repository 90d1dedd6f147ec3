#!/usr/bin/env bash
# Side-by-side speed against the reference engine (../shared/anchor), on the
# same files, in one run on this machine.
#
#   scripts/compare.sh models [-r REPS] [-p PROMPT] [-d DEPTH] [--kv-type f16|q8_0] [--shape SHAPE] [TYPE...]
#       bench-135m (or --shape: bench-moe, bench-gemma3, ...) made in each weight type (default: every type make-model
#       writes); per type promptcache bench-model and the reference's
#       llama-bench, run alternately: ppPROMPT (512) from an empty cache and
#       tg128 after DEPTH (0) cached tokens, tokens/s and the ratios;
#       --kv-type q8_0 gives both engines 8-bit K/V (-ctk/-ctv q8_0 for the reference).
#       Prints a Markdown table.
#
#   scripts/compare.sh trace [--trace F] [--requests N] [--step-ms "50 0"]
#                            [--admission "cache-aware fifo"] [--isa avx2] [--no-reference]
#       A window of a real trace replayed with its arrival times (token scale
#       1/32, output scale 0.05, at most 16 output tokens, as issue 19 set it)
#       against `promptcache serve -t 2` once per --max-step-ms and
#       --admission value (PROMPTCACHE_ISA=--isa), then
#       against the reference's llama-server -t 2 (defaults), one after the
#       other, through `promptcache bench -w trace`: ITL p50/p99, TPOT, TTFT,
#       output tokens/s and the cached share (with the ideal bench prints);
#       for promptcache the mean and p90 step (its /metrics) and TTFT of hits
#       (>= 90% cached) and misses apart.
#
#   scripts/compare.sh server [-r REPS] [--type TYPE] [--prompt-tokens N] [--cached N] [--new N]
#       Both servers, one after the other (-t 2, defaults otherwise; the
#       reference with -c 16384), on the same streamed /v1/completions
#       requests: a cold N-token prompt (default 4,266), the same prompt
#       repeated, then a cold prompt of --cached tokens (4,000) followed by
#       it plus --new (256) tokens (a partial hit). Client-side TTFT (send to
#       first text) and ITL (mean gap) per case, medians over REPS fresh prompts,
#       and the ratios (ours / reference) in one table.
#
#   scripts/compare.sh draft [--type TYPE] [--requests N] [--draft N]
#       Prompt-lookup drafts on a copy-heavy and a copy-free workload: bench-135m
#       made with --copy (its first layers quote the prompt as real models do)
#       under `bench -w quote` (answers continue a passage of the document),
#       greedy, and plain bench-135m sampled at temperature 1 (random weights:
#       the answers copy nothing; greedy, they fall into loops, which drafts
#       would predict) under `-w chat`, one request at a time (-c 1, token ids
#       1000..30000), against
#       promptcache serve without and with --draft lookup:N (8), and the
#       reference's llama-server without and with --spec-type ngram-simple; the
#       decode tokens/s (1 / mean time per output token) of each in one table,
#       and a check that our greedy outputs are the same with and without drafts.
#
# Needs build/promptcache (scripts/setup.sh or scripts/test.sh builds it).
# Models are made once into ~/.cache/promptcache. 2 threads each.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/promptcache
anchor="${PROMPTCACHE_ANCHOR:-../shared/anchor}"  # another build of it (e.g. without the AVX-512 variants)
cache="${PROMPTCACHE_CACHE:-$HOME/.cache/promptcache}"
[ -x "$bin" ] || { echo "compare.sh: build first ($bin missing)" >&2; exit 1; }
[ -x "$anchor/llama-bench" ] || { echo "compare.sh: $anchor/llama-bench not found" >&2; exit 1; }
mkdir -p "$cache"

shape=bench-135m  # models --shape
model_for() {  # TYPE -> path, made once
  local f="$cache/$shape-$1.gguf"
  [ -f "$f" ] || "$bin" make-model --shape "$shape" --type "$1" -o "$f" >&2
  echo "$f"
}

ours() {  # FILE REPS PROMPT DEPTH -> "pp tg pp_roof tg_roof": tok/s (ppPROMPT from an empty cache, tg128 after
          # DEPTH tokens) and their fractions of this run's roofline
  "$bin" bench-model -m "$1" -p "$3" -n 128 -d "$4" -r "$2" -t 2 --kv-type "$kv" --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); p,t=j["pp"],j["tg"]; print(round(p["tok_s_mean"],1), round(t["tok_s_mean"],1), round(p["roofline_fraction"],3), round(t["roofline_fraction"],3))'
}

theirs() {  # FILE REPS PROMPT DEPTH -> "pp tg" tok/s (two runs: its -d applies to pp as well)
  local pp tg
  pp=$("$anchor/llama-bench" -m "$1" -t 2 -p "$3" -n 0 -r "$2" -ctk "$kv" -ctv "$kv" -o json 2>/dev/null |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)[0]["avg_ts"],1))')
  tg=$("$anchor/llama-bench" -m "$1" -t 2 -p 0 -n 128 -d "$4" -r "$2" -ctk "$kv" -ctv "$kv" -o json 2>/dev/null |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)[0]["avg_ts"],1))')
  echo "$pp $tg"
}

kv=f16  # K/V element type of both engines (models --kv-type)

models() {
  local reps=3 prompt=512 depth=0
  while [ $# -gt 0 ]; do
    case "$1" in
      -r) reps="$2"; shift 2 ;;
      -p) prompt="$2"; shift 2 ;;
      -d) depth="$2"; shift 2 ;;
      --kv-type) kv="$2"; shift 2 ;;
      --shape) shape="$2"; shift 2 ;;
      *) break ;;
    esac
  done
  local types=("$@")
  [ ${#types[@]} -gt 0 ] || types=(f16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_k q3_k q4_k q4_k_m q5_k q5_k_m q6_k iq4_xs)
  echo "$shape; CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; K/V $kv; flags: $(grep -o -w 'avx512_vnni\|avx512_bf16\|amx_int8\|avx_vnni\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo
  local tg="tg128"
  [ "$depth" = 0 ] || tg="tg128 @ d$depth"
  echo "| type | file MB | pp$prompt ours (roofline) | pp$prompt reference | ratio | $tg ours (roofline) | $tg reference | ratio |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for t in "${types[@]}"; do
    local f; f=$(model_for "$t")
    local mb; mb=$(( $(stat -L -c %s "$f") / 1000000 ))
    read -r our_pp our_tg our_ppf our_tgf < <(ours "$f" "$reps" "$prompt" "$depth")
    read -r ref_pp ref_tg < <(theirs "$f" "$reps" "$prompt" "$depth")
    python3 -c "import sys; t,mb,a,b,c,d,e,f=sys.argv[1:]; a,b,c,d,e,f=map(float,(a,b,c,d,e,f)); print(f'| {t} | {mb} | {a:,.0f} ({e:.0%}) | {b:,.0f} | {a/b:.2f}x | {c:,.0f} ({f:.0%}) | {d:,.0f} | {c/d:.2f}x |')" \
      "$t" "$mb" "$our_pp" "$ref_pp" "$our_tg" "$ref_tg" "$our_ppf" "$our_tgf"
  done
}

free_port() {  # a loopback port nothing listens on now
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

serve_and_bench() {  # NAME PORT OUT_JSON BENCH_ARGS... (the server is already starting on PORT)
  local name=$1 port=$2 json=$3; shift 3
  local deadline=$((SECONDS + 120))
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "compare.sh: $name did not start" >&2; return 1; }
    sleep 0.5
  done
  "$bin" bench --url "http://127.0.0.1:$port" -w trace "$@" --no-progress --json "$json" >"${json%.json}.txt" 2>&1
}

trace() {
  local tr=../shared/traces/azure_conv_2023.jsonl requests=600 steps="50 0" admissions="cache-aware" reference=1 out=compare-trace
  local isa=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --trace) tr="$2"; shift 2 ;;
      --requests) requests="$2"; shift 2 ;;
      --step-ms) steps="$2"; shift 2 ;;
      --admission) admissions="$2"; shift 2 ;;
      --isa) isa="$2"; shift 2 ;;
      --no-reference) reference=0; shift ;;
      --out) out="$2"; shift 2 ;;
      *) echo "compare.sh trace: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$out"
  local f; f=$(model_for q8_0)
  local name; name=$(basename "$tr" .jsonl)
  local args=(--trace "$tr" --requests "$requests" --token-scale 0.03125 --output-scale 0.05 --max-output-tokens 16)
  local port arms=() ms adm
  for ms in $steps; do
    for adm in $admissions; do
      local arm="promptcache-step$ms-$adm"
      port=$(free_port)
      PROMPTCACHE_ISA="$isa" "$bin" serve -m "$f" --host 127.0.0.1 --port "$port" -t 2 --max-step-ms "$ms" \
        --admission "$adm" >"$out/serve-$ms-$adm.log" 2>&1 &
      local pid=$!
      serve_and_bench "promptcache" "$port" "$out/$name-$arm.json" "${args[@]}" || true
      curl -fsS "http://127.0.0.1:$port/metrics" >"$out/$name-$arm.metrics" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" || true
      arms+=("$arm")
    done
  done
  if [ "$reference" = 1 ]; then
    port=$(free_port)
    "$anchor/llama-server" -m "$f" --host 127.0.0.1 --port "$port" -t 2 >"$out/reference.log" 2>&1 &
    local pid=$!
    serve_and_bench "reference" "$port" "$out/$name-reference.json" "${args[@]}" || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || true
    arms+=(reference)
  fi
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores${isa:+, PROMPTCACHE_ISA=$isa for promptcache}; $name, $requests requests"
  python3 "$(dirname "$0")/trace_table.py" "$out" "$name" "${arms[@]}"
}

wait_health() {  # NAME PORT
  local deadline=$((SECONDS + 120))
  until curl -fsS -o /dev/null "http://127.0.0.1:$2/health" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "compare.sh: $1 did not start" >&2; return 1; }
    sleep 0.5
  done
}

server() {
  local reps=3 type=q8_0 total=4266 cached=4000 new=256 out=compare-server
  while [ $# -gt 0 ]; do
    case "$1" in
      -r) reps="$2"; shift 2 ;;
      --type) type="$2"; shift 2 ;;
      --prompt-tokens) total="$2"; shift 2 ;;
      --cached) cached="$2"; shift 2 ;;
      --new) new="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      *) echo "compare.sh server: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$out"
  local f; f=$(model_for "$type")
  local port pid
  for arm in promptcache reference; do
    port=$(free_port)
    if [ "$arm" = promptcache ]; then
      "$bin" serve -m "$f" --host 127.0.0.1 --port "$port" -t 2 >"$out/$arm.log" 2>&1 &
    else
      "$anchor/llama-server" -m "$f" --host 127.0.0.1 --port "$port" -t 2 -c 16384 >"$out/$arm.log" 2>&1 &
    fi
    pid=$!
    wait_health "$arm" "$port" && python3 scripts/ttft_cases.py --url "http://127.0.0.1:$port" --reps "$reps" \
      --prompt-tokens "$total" --cached "$cached" --new "$new" --json "$out/$arm.json" || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || true
  done
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; bench-135m $type, $reps reps"
  python3 - "$out" <<'PYEOF'
import json, sys
out = sys.argv[1]
a, b = (json.load(open(f"{out}/{n}.json")) for n in ("promptcache", "reference"))
print("| case | prompt tokens (ours / ref) | cached (ours / ref) | TTFT ours | TTFT reference | ratio | ITL ours | ITL reference |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for case in a["cases"]:
    x, y = a["cases"][case], b["cases"][case]
    print(f"| {case} | {x['prompt_tokens']} / {y['prompt_tokens']} | {x['cached_tokens']} / {y['cached_tokens']} | "
          f"{x['ttft_ms']:,.1f} ms | {y['ttft_ms']:,.1f} ms | {x['ttft_ms'] / y['ttft_ms']:.2f}x | "
          f"{x['itl_ms']:.1f} ms | {y['itl_ms']:.1f} ms |")
PYEOF
}

draft() {
  local type=q8_0 requests=8 n=8 out=compare-draft
  while [ $# -gt 0 ]; do
    case "$1" in
      --type) type="$2"; shift 2 ;;
      --requests) requests="$2"; shift 2 ;;
      --draft) n="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      *) echo "compare.sh draft: unknown option $1" >&2; exit 2 ;;
    esac
  done
  mkdir -p "$out"
  local copy="$cache/bench-135m-copy-$type.gguf" plain; plain=$(model_for "$type")
  [ -f "$copy" ] || "$bin" make-model --shape bench-135m --type "$type" --copy -o "$copy" >&2
  local port pid arm w f
  for w in quote chat; do
   if [ "$w" = quote ]; then f=$copy; else f=$plain; fi
   for arm in promptcache promptcache-draft reference reference-ngram; do
    port=$(free_port)
    case "$arm" in
      promptcache) "$bin" serve -m "$f" --host 127.0.0.1 --port "$port" -t 2 >"$out/$arm.log" 2>&1 & ;;
      promptcache-draft) "$bin" serve -m "$f" --host 127.0.0.1 --port "$port" -t 2 --draft "lookup:$n" >"$out/$arm.log" 2>&1 & ;;
      reference) "$anchor/llama-server" -m "$f" --host 127.0.0.1 --port "$port" -t 2 -c 8192 >"$out/$arm.log" 2>&1 & ;;
      reference-ngram) "$anchor/llama-server" -m "$f" --host 127.0.0.1 --port "$port" -t 2 -c 8192 \
        --spec-type ngram-simple >"$out/$arm.log" 2>&1 & ;;
    esac
    pid=$!
    if wait_health "$arm" "$port"; then
      local extra='{}'
      [ "$w" = chat ] && extra='{"temperature": 1.0}'
      "$bin" bench --url "http://127.0.0.1:$port" -w "$w" --requests "$requests" -c 1 --token-range 1000:30000 \
        --extra-body "$extra" --no-progress --json "$out/$w-$arm.json" >"$out/$w-$arm.txt" 2>&1 || true
      curl -fsS "http://127.0.0.1:$port/metrics" >"$out/$w-$arm.metrics" 2>/dev/null || true
      if [ "$arm" = promptcache-draft ] && [ "$w" = quote ]; then
        python3 - "$port" >"$out/identity.txt" <<'PYEOF' || true
import json, random, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/v1/completions"
random.seed(7)
same = 0
for i in range(4):
    doc = [random.randrange(1000, 30000) for _ in range(1500)]
    prompt = doc + [random.randrange(1000, 30000) for _ in range(32)] + doc[100 * i:100 * i + 16]
    texts = []
    for extra in ({}, {"speculative.n_max": 0}):
        body = {"prompt": prompt, "max_tokens": 96, "temperature": 0, "ignore_eos": True, "logprobs": 1, **extra}
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        r = json.load(urllib.request.urlopen(req))
        texts.append((r["choices"][0]["text"], r["choices"][0]["logprobs"]["tokens"], r.get("timings", {}).get("draft_n_accepted")))
    same += texts[0][:2] == texts[1][:2]
    print(f"prompt {i}: drafts accepted {texts[0][2]}, outputs {'identical' if texts[0][:2] == texts[1][:2] else 'DIFFER'}")
print(f"{same}/4 greedy outputs identical with and without drafts")
PYEOF
      fi
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || true
   done
  done
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; bench-135m $type (--copy for quote), $requests requests per workload, -c 1"
  python3 - "$out" <<'PYEOF'
import json, os, re, sys
out = sys.argv[1]
def decode(w, arm):
    try:
        g = next(g for g in json.load(open(f"{out}/{w}-{arm}.json"))["groups"] if g["name"] == "all")
        return 1000 / g["tpot_ms"]["mean"], g["ttft_ms"]["p50"], g["itl_ms"]["p50"]
    except Exception:
        return None
def acceptance(w):
    try:
        m = open(f"{out}/{w}-promptcache-draft.metrics").read()
        d = float(re.search(r'draft_tokens_total\{result="drafted"\} (\S+)', m).group(1))
        a = float(re.search(r'draft_tokens_total\{result="accepted"\} (\S+)', m).group(1))
        return f"{a:.0f}/{d:.0f} accepted" if d else "none drafted"
    except Exception:
        return ""
print("| workload | promptcache | + lookup drafts | ratio | reference | + ngram-simple | ratio | drafts/plain: ours vs reference's |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for w in ("quote", "chat"):
    r = {arm: decode(w, arm) for arm in ("promptcache", "promptcache-draft", "reference", "reference-ngram")}
    cell = lambda x: f"{x[0]:.1f} tok/s" if x else "failed"
    ratio = lambda x, y: f"{x[0] / y[0]:.2f}x" if x and y else "-"
    vs = f"{r['promptcache-draft'][0] / r['reference-ngram'][0]:.2f}x" if r["promptcache-draft"] and r["reference-ngram"] else "-"
    print(f"| {w} | {cell(r['promptcache'])} | {cell(r['promptcache-draft'])} | {ratio(r['promptcache-draft'], r['promptcache'])} | "
          f"{cell(r['reference'])} | {cell(r['reference-ngram'])} | {ratio(r['reference-ngram'], r['reference'])} | {vs} |")
print(f"\nOur drafts: quote {acceptance('quote')}, chat {acceptance('chat')} (decode tok/s = 1000 / mean time per output token)")
if os.path.exists(f"{out}/identity.txt"):
    print(open(f"{out}/identity.txt").read().strip())
PYEOF
}

case "${1:-}" in
  models) shift; models "$@" ;;
  trace) shift; trace "$@" ;;
  server) shift; server "$@" ;;
  draft) shift; draft "$@" ;;
  *) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
