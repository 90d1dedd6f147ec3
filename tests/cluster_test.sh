#!/usr/bin/env bash
# scripts/cluster.sh end to end: two replicas behind HAProxy sharing one
# Redis. The same long prompt twice through the prefix-affinity entry: the
# second is answered from the first replica's cache. A new prompt twice
# through the round-robin entry: the second lands on the other replica and
# loads the prefix from Redis. `down` stops every process `up` started.
#   tests/cluster_test.sh PROMPTCACHE_BINARY REPO_ROOT
set -euo pipefail
bin=$1
root=$2
command -v haproxy >/dev/null || { echo "haproxy is missing: run scripts/install-deps.sh"; exit 1; }
work=$(mktemp -d)
run="$work/run"
cleanup() { "$root/scripts/cluster.sh" down --dir "$run" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
# Ports below the kernel's ephemeral range, so no outgoing connection (a
# replica's own Redis client, another test's curl) can hold one of ours;
# each of the 13 ports the cluster uses is checked free before it starts.
port=$(python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
top = min(low, 65536) - 16
for _ in range(200):
    base = random.randrange(10000, max(top, 10001))
    try:
        for p in range(base, base + 13):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(base)
    break
else:
    raise SystemExit("no free port range below the ephemeral ports")
PY
)
# Big enough that loading a prefix from Redis beats recomputing it (the
# replicas decide by measured costs).
"$bin" make-model --n-embd 512 --n-layer 8 --n-head 8 --n-kv-head 2 --n-ff 1536 --n-ctx 4096 --vocab-size 4096 --type q8_0 \
  -o "$work/model.gguf" 2>/dev/null
"$root/scripts/cluster.sh" up --bin "$bin" --replicas 2 --threads-each 1 --port "$port" --model "$work/model.gguf" --dir "$run"

prompt=$(python3 -c "print('The mill by the river ground flour for the whole village every morning. ' * 40)")
ask() {  # PORT -> "cached_tokens redis_tokens text"
  curl -fsS "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 8, "temperature": 0}))' "$2")" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); t=j["timings"].get("cached_tokens_by_tier", {});
print(j["usage"]["prompt_tokens_details"]["cached_tokens"], t.get("redis", 0), json.dumps(j["choices"][0]["text"]))'
}
read -r c1 _ t1 <<<"$(ask "$port" "$prompt")"
read -r c2 _ t2 <<<"$(ask "$port" "$prompt")"
echo "prefix affinity: first cached $c1, second cached $c2"
[ "$c1" -eq 0 ] || { echo "FAIL: the first request found a cache"; exit 1; }
[ "$c2" -gt 500 ] || { echo "FAIL: the second request was not answered from cache"; exit 1; }
[ "$t1" = "$t2" ] || { echo "FAIL: outputs differ: $t1 vs $t2"; exit 1; }

other="Different: $prompt"
read -r r1 _ u1 <<<"$(ask $((port + 1)) "$other")"
read -r r2 redis2 u2 <<<"$(ask $((port + 1)) "$other")"
echo "round robin: first cached $r1, second cached $r2 ($redis2 from Redis)"
[ "$redis2" -gt 500 ] || { echo "FAIL: the other replica did not load the prefix from Redis"; exit 1; }
[ "$u1" = "$u2" ] || { echo "FAIL: outputs differ across replicas: $u1 vs $u2"; exit 1; }

# A body HAProxy cannot read as JSON (no routing key) still reaches a
# replica, which answers 400 with an OpenAI-shaped error; both keep serving.
code=$(curl -s -o "$run/bad.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/chat/completions" \
  -H 'Content-Type: application/json' -d '{"messages": [{"role": "user", "content": ')
echo "malformed body through the prefix entry: HTTP $code $(cat "$run/bad.json")"
[ "$code" = 400 ] || { echo "FAIL: a malformed body got HTTP $code"; exit 1; }
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"]["message"]' "$run/bad.json" ||
  { echo "FAIL: the error is not OpenAI-shaped JSON"; exit 1; }
read -r c3 _ t3 <<<"$(ask "$port" "$prompt")"
[ "$t3" = "$t1" ] || { echo "FAIL: the cluster stopped serving after a malformed body"; exit 1; }

pids=$(awk '{ print $2 }' "$run/pids")
"$root/scripts/cluster.sh" down --dir "$run"
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then echo "FAIL: process $p still running after down"; exit 1; fi
done
echo "ok"
