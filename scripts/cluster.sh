#!/usr/bin/env bash
# Several promptcache replicas behind HAProxy, sharing one Redis tier, on
# loopback (docs/DEPLOY.md). `up` starts Redis, N replicas and HAProxy and
# records what it started in DIR/pids; `down` stops exactly those processes.
#
#   scripts/cluster.sh up [--replicas 2] [--threads-each 1] [--port 8080] [--model M.gguf]
#                         [--dir cluster-run] [--kv-cache-mem BYTES] [--serve-arg ARG]... [--bin PATH]
#                         [--no-redis]   (replicas with no shared tier: the baseline it is measured against)
#   scripts/cluster.sh down [--dir cluster-run]
#   scripts/cluster.sh kill-replica I [--dir cluster-run]   (SIGKILL replica I: failover drills)
#   scripts/cluster.sh status [--dir cluster-run]
#
# Ports: PORT prefix-affinity entry, PORT+1 round-robin entry, PORT+2 Redis,
# PORT+10+i replica i. Needs a build (scripts/setup.sh), haproxy and
# redis-server (scripts/deps.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-}"
[ -n "$cmd" ] && shift
replicas=2 threads=1 port=8080 dir=cluster-run kv_mem="" victim="" redis=1
model="$HOME/.cache/promptcache/bench-135m-q8_0.gguf"
serve_args=()
bin=build/promptcache
if [ "$cmd" = kill-replica ]; then victim="${1:?kill-replica needs a replica number}"; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas="$2"; shift 2 ;;
    --threads-each) threads="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --kv-cache-mem) kv_mem="$2"; shift 2 ;;
    --serve-arg) serve_args+=("$2"); shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --no-redis) redis=0; shift ;;
    *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

wait_http() {  # URL SECONDS [PID]: until it answers 200; fails at once if PID exits
  local url=$1 deadline=$((SECONDS + $2)) pid=${3:-}
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
}

up() {
  [ -x "$bin" ] || { echo "cluster.sh: build first ($bin missing; scripts/setup.sh)" >&2; exit 1; }
  command -v haproxy >/dev/null || { echo "cluster.sh: haproxy missing (scripts/install-deps.sh)" >&2; exit 1; }
  if [ -s "$dir/pids" ]; then echo "cluster.sh: $dir/pids exists: 'down' first" >&2; exit 1; fi
  mkdir -p "$dir" "$(dirname "$model")"
  [ -f "$model" ] || "$bin" make-model --shape bench-135m --type q8_0 -o "$model"
  : >"$dir/pids"
  trap 'echo "cluster.sh: start failed; stopping what started" >&2; down; exit 1' ERR
  # The shared tier: its entries are sealed with this secret (HMAC-SHA256),
  # so a value that did not come from a replica holding it is refused.
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/tier-secret"
  chmod 600 "$dir/tier-secret"
  local redis_port=$((port + 2))
  local tier=()
  if [ "$redis" = 1 ]; then
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory 1gb \
      --maxmemory-policy allkeys-lru --loglevel warning >"$dir/redis.log" 2>&1 &
    echo "redis $!" >>"$dir/pids"
    tier=(--redis "127.0.0.1:$redis_port" --tier-secret-file "$dir/tier-secret")
  fi
  local i servers=""
  for ((i = 0; i < replicas; i++)); do
    local p=$((port + 10 + i))
    local extra=()
    [ -n "$kv_mem" ] && extra+=(--kv-cache-mem "$kv_mem")
    "$bin" serve -m "$model" --host 127.0.0.1 --port "$p" -t "$threads" --alias promptcache \
      "${tier[@]}" "${extra[@]}" "${serve_args[@]}" \
      >"$dir/replica-$i.log" 2>&1 &
    echo "replica-$i $!" >>"$dir/pids"
    servers+="    server r$i 127.0.0.1:$p"$'\n'
  done
  for ((i = 0; i < replicas; i++)); do
    wait_http "http://127.0.0.1:$((port + 10 + i))/health" 120 "$(awk -v n="replica-$i" '$1 == n { print $2 }' "$dir/pids")" || { echo "replica $i did not start:" >&2; tail "$dir/replica-$i.log" >&2; false; }
  done
  # The shipped configuration with this cluster's replicas in both backends.
  awk -v servers="$servers" '{ print } /# servers \(added by scripts\/cluster.sh\)/ { printf "%s", servers }' \
    deploy/haproxy.cfg >"$dir/haproxy.cfg"
  PC_PREFIX_PORT=$port PC_RR_PORT=$((port + 1)) haproxy -c -q -f "$dir/haproxy.cfg"
  PC_PREFIX_PORT=$port PC_RR_PORT=$((port + 1)) haproxy -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
  echo "haproxy $!" >>"$dir/pids"
  wait_http "http://127.0.0.1:$port/health" 30 "$!"
  trap - ERR
  echo "cluster up: prefix affinity http://127.0.0.1:$port, round robin http://127.0.0.1:$((port + 1)),"
  local shared="Redis 127.0.0.1:$redis_port"
  [ "$redis" = 1 ] || shared="no shared tier"
  echo "  $replicas replicas x $threads threads on ports $((port + 10))..$((port + 9 + replicas)), $shared ($dir/)"
}

down() {
  [ -f "$dir/pids" ] || { echo "cluster.sh: nothing recorded in $dir/pids" >&2; return 0; }
  local name pid pids=()
  # HAProxy first (no new requests), then replicas (they drain), then Redis.
  for name in haproxy replica redis; do
    while read -r n pid; do
      [[ "$n" == "$name"* ]] || continue
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid") || true
    done <"$dir/pids"
  done
  local deadline=$((SECONDS + 40))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ $SECONDS -ge $deadline ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
      sleep 0.2
    done
  done
  rm -f "$dir/pids"
  echo "cluster down (${#pids[@]} processes stopped)"
}

kill_replica() {
  local pid
  pid=$(awk -v n="replica-$victim" '$1 == n { print $2 }' "$dir/pids")
  [ -n "$pid" ] || { echo "cluster.sh: no replica-$victim in $dir/pids" >&2; exit 1; }
  kill -KILL "$pid"
  echo "killed replica-$victim (pid $pid)"
}

status() {
  [ -f "$dir/pids" ] || { echo "no cluster recorded in $dir/pids"; return 0; }
  while read -r n pid; do
    if kill -0 "$pid" 2>/dev/null; then echo "$n $pid running"; else echo "$n $pid gone"; fi
  done <"$dir/pids"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  kill-replica) kill_replica ;;
  status) status ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
