#!/usr/bin/env bash
# bench/overhead.sh: the gateway's overhead with a fast upstream, measured side by side in one run.
#
# Three targets get the same wrk load (bench/overhead_request.lua: POST /v1/chat/completions with a
# ~2 KB system prompt, two tools, a user message, max_tokens 1):
#   direct      wrk -> prefixgate-engine (sim device, --sim-speedup inf: no simulated GPU time,
#               only the engine's own HTTP, tokenization and scheduler step)
#   nginx       wrk -> nginx proxy_pass (keep-alive upstream pool) -> the same engine
#   prefixgate  wrk -> prefixgate --policy cache_aware (parse, canonicalize, render, tokenize,
#               hash, route, pooled forward) -> the same engine
# and the script prints requests/s, p50 and p99 for each, the ratio of requests/s to nginx's and
# the p50 added over direct, and writes build/bench/overhead.json.
#
# Usage: bench/overhead.sh            (about a minute after the build; needs no GPU)
# Environment (defaults in brackets):
#   DURATION [10s] WARMUP [3s] CONNECTIONS [16] WRK_THREADS [1]   wrk settings, same for all
#   PROXY_THREADS [1]  prefixgate --threads and nginx worker_processes (kept equal)
#   ENGINE_THREADS [1] the engine's HTTP I/O threads
#   PIN [1]            on a machine with >= 2 cores: wrk on the last core, the engine and the
#                      proxy under test on the others (taskset), so the load generator does not
#                      steal the proxy's CPU; PIN=0 leaves placement to the kernel
#   PROFILE [0]        PROFILE=1: perf record -g on prefixgate during its measured run
#                      (build/bench/perf-gateway.data, top symbols in build/bench/perf-gateway.txt)
#   GATEWAY_ARGS []    extra prefixgate flags, e.g. "--config my.yaml" to compare rule settings
#   BUILD_DIR [build/release]
# wrk and nginx are benchmark-only tools: when missing, the script installs them with apt-get
# (Debian packages `wrk` and `nginx`). Everything listens on 127.0.0.1; every process the script
# starts is stopped on exit (nginx runs in the foreground as our child, never as a daemon).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/release}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
CONNECTIONS="${CONNECTIONS:-16}"
WRK_THREADS="${WRK_THREADS:-1}"
PROXY_THREADS="${PROXY_THREADS:-1}"
ENGINE_THREADS="${ENGINE_THREADS:-1}"
PIN="${PIN:-1}"
PROFILE="${PROFILE:-0}"
OUT_DIR="$ROOT/build/bench"
LUA="$ROOT/bench/overhead_request.lua"

log() { echo "overhead.sh: $*" >&2; }

# --- tools -------------------------------------------------------------------------------------
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null && [[ -x "$(command -v nginx)" ]] || missing+=(nginx)
if ((${#missing[@]})); then
  log "installing ${missing[*]} with apt-get (benchmark only)"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
    >/dev/null
fi
if [[ $PROFILE == 1 ]] && ! command -v perf >/dev/null; then
  log "PROFILE=1 needs perf"; exit 2
fi

# --- build -------------------------------------------------------------------------------------
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake --preset release -S "$ROOT" >/dev/null
fi
log "building prefixgate and prefixgate-engine ($BUILD_DIR)"
cmake --build "$BUILD_DIR" --target prefixgate prefixgate-engine >/dev/null
ENGINE="$BUILD_DIR/engine/prefixgate-engine"
GATEWAY="$BUILD_DIR/gateway/prefixgate"

# --- processes and cleanup ---------------------------------------------------------------------
TMP="$(mktemp -d /tmp/prefixgate-overhead.XXXXXX)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ncpu="$(nproc)"
SERVER_CPUS="" WRK_CPUS=""
if [[ $PIN == 1 && $ncpu -ge 2 ]]; then
  SERVER_CPUS="0-$((ncpu - 2))"
  WRK_CPUS="$((ncpu - 1))"
fi
# Only ever run in the background (`start_server ... &`): exec makes the recorded $! the server's
# own pid (taskset execs too), so cleanup and perf reach the process itself, not a subshell.
start_server() {
  if [[ -n $SERVER_CPUS ]]; then exec taskset -c "$SERVER_CPUS" "$@"; else exec "$@"; fi
}
on_wrk() { if [[ -n $WRK_CPUS ]]; then taskset -c "$WRK_CPUS" "$@"; else "$@"; fi; }

# Waits for "listening on http://HOST:PORT" in a log and prints PORT.
listening_port() {
  local file="$1" pid="$2" line
  for _ in $(seq 300); do
    line="$(grep -m1 -o 'listening on http://[0-9.]*:[0-9]*' "$file" 2>/dev/null || true)"
    if [[ -n $line ]]; then echo "${line##*:}"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  log "no 'listening on' line in $file:"; cat "$file" >&2; return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_http() {  # URL: until it answers at all
  for _ in $(seq 100); do
    curl -s -o /dev/null --max-time 1 "$1" && return 0
    sleep 0.1
  done
  log "$1 does not answer"; return 1
}

start_server "$ENGINE" --device sim --sim-speedup inf --model builtin:tiny --host 127.0.0.1 \
  --port 0 --threads "$ENGINE_THREADS" --log-level warn >"$TMP/engine.log" 2>&1 &
pids+=($!)
ENGINE_PID="${pids[-1]}"
ENGINE_PORT="$(listening_port "$TMP/engine.log" "$ENGINE_PID")"

NGINX_PORT="$(free_port)"
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<EOF
# Written by bench/overhead.sh: a plain reverse proxy with an upstream keep-alive pool.
worker_processes $PROXY_THREADS;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  client_max_body_size 16m;
  keepalive_requests 1000000;     # prefixgate does not cap requests per client connection either
  upstream engine {
    server 127.0.0.1:$ENGINE_PORT;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
# -e: the startup error log too, so nginx never touches /var/log/nginx.
start_server nginx -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx/nginx.conf" \
  >"$TMP/nginx/stdout.log" 2>&1 &
pids+=($!)
NGINX_PID="${pids[-1]}"

start_server "$GATEWAY" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ENGINE_PORT" \
  --policy cache_aware --threads "$PROXY_THREADS" --log-level warn ${GATEWAY_ARGS:-} \
  >"$TMP/gateway.log" 2>&1 &
pids+=($!)
GATEWAY_PID="${pids[-1]}"
GATEWAY_PORT="$(listening_port "$TMP/gateway.log" "$GATEWAY_PID")"

wait_http "http://127.0.0.1:$NGINX_PORT/health"
for _ in $(seq 100); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY_PORT/health")" == 200 ]] \
    && break
  sleep 0.1
done

# --- load --------------------------------------------------------------------------------------
mkdir -p "$OUT_DIR"
declare -A RPS P50 P99 REQS PROXY_CPU ENGINE_CPU
CLK_TCK="$(getconf CLK_TCK)"
# CPU time (user + system, all threads) of the given processes, in clock ticks.
cpu_ticks() {
  local total=0 pid stat
  for pid in "$@"; do
    stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
    stat="${stat##*) }"  # fields after "(comm) ", so a comm with spaces cannot shift them
    read -r -a f <<<"$stat"
    total=$((total + f[11] + f[12]))  # utime, stime: fields 14 and 15 of proc(5)
  done
  echo "$total"
}
# The processes that make up each target's proxy (none for direct; nginx's master and workers).
proxy_pids() {
  case "$1" in
    nginx) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID") ;;
    prefixgate) echo "$GATEWAY_PID" ;;
  esac
}
run_wrk() {  # NAME URL
  local name="$1" url="$2" out line
  on_wrk wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$WARMUP" -s "$LUA" "$url" >"$TMP/$name.warmup" 2>&1
  line="$(grep '^PGBENCH' "$TMP/$name.warmup")"
  if [[ $line != *" errors=0 non2xx=0 "* ]]; then
    log "$name: warm-up had failures: $line"; cat "$TMP/$name.warmup" >&2; exit 1
  fi
  local perf_pid=""
  if [[ $name == prefixgate && $PROFILE == 1 ]]; then
    rm -f "$OUT_DIR"/perf-gateway.data*
    perf record -q -g -p "$GATEWAY_PID" -o "$OUT_DIR/perf-gateway.data" >"$OUT_DIR/perf-gateway.log" 2>&1 &
    perf_pid=$!
    sleep 0.3
  fi
  local proxy_before engine_before proxy_after engine_after
  proxy_before="$(cpu_ticks $(proxy_pids "$name"))"
  engine_before="$(cpu_ticks "$ENGINE_PID")"
  out="$(on_wrk wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$LUA" "$url" 2>&1)"
  proxy_after="$(cpu_ticks $(proxy_pids "$name"))"
  engine_after="$(cpu_ticks "$ENGINE_PID")"
  if [[ -n $perf_pid ]]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  echo "$out" >"$OUT_DIR/wrk-$name.txt"
  line="$(grep '^PGBENCH' <<<"$out")"
  if [[ $line != *" errors=0 non2xx=0 "* ]]; then
    log "$name: failures during the run: $line"; echo "$out" >&2; exit 1
  fi
  local kv
  for kv in $line; do
    case "$kv" in
      rps=*) RPS[$name]="${kv#rps=}" ;;
      p50_us=*) P50[$name]="${kv#p50_us=}" ;;
      p99_us=*) P99[$name]="${kv#p99_us=}" ;;
      requests=*) REQS[$name]="${kv#requests=}" ;;
    esac
  done
  # CPU per request: robust to a busy machine, where requests/s mostly measure the neighbours.
  PROXY_CPU[$name]="$(awk -v t=$((proxy_after - proxy_before)) -v hz="$CLK_TCK" -v n="${REQS[$name]}" \
    'BEGIN { printf "%.1f", t / hz * 1e6 / n }')"
  ENGINE_CPU[$name]="$(awk -v t=$((engine_after - engine_before)) -v hz="$CLK_TCK" -v n="${REQS[$name]}" \
    'BEGIN { printf "%.1f", t / hz * 1e6 / n }')"
  log "$name: ${RPS[$name]} req/s, p50 ${P50[$name]} us, p99 ${P99[$name]} us"
}

pinning="off"
[[ -z $SERVER_CPUS ]] || pinning="servers on CPU $SERVER_CPUS, wrk on CPU $WRK_CPUS"
log "engine :$ENGINE_PORT, nginx :$NGINX_PORT, prefixgate :$GATEWAY_PORT;" \
  "wrk -t$WRK_THREADS -c$CONNECTIONS -d$DURATION (warm-up $WARMUP)," \
  "proxy threads $PROXY_THREADS, pinning $pinning"
run_wrk direct "http://127.0.0.1:$ENGINE_PORT"
run_wrk nginx "http://127.0.0.1:$NGINX_PORT"
run_wrk prefixgate "http://127.0.0.1:$GATEWAY_PORT"

# The gateway really routed with cache_aware (decisions by reason).
curl -s "http://127.0.0.1:$GATEWAY_PORT/metrics" | grep '^prefixgate_routing_decisions_total' \
  >"$OUT_DIR/gateway-decisions.txt" || true

if [[ $PROFILE == 1 ]]; then
  perf report -i "$OUT_DIR/perf-gateway.data" --no-children --stdio --percent-limit 1 \
    -g none --sort symbol 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 \
    >"$OUT_DIR/perf-gateway.txt" || true
  log "profile: $OUT_DIR/perf-gateway.data, top symbols in $OUT_DIR/perf-gateway.txt"
fi

# --- report ------------------------------------------------------------------------------------
targets=(direct nginx prefixgate)
printf '\n%-11s %12s %10s %10s %14s %16s %18s %19s\n' target "requests/s" "p50 (us)" "p99 (us)" \
  "req/s vs nginx" "added p50 (us)" "proxy CPU us/req" "engine CPU us/req"
for t in "${targets[@]}"; do
  awk -v t="$t" -v r="${RPS[$t]}" -v p50="${P50[$t]}" -v p99="${P99[$t]}" \
    -v rn="${RPS[nginx]}" -v d50="${P50[direct]}" -v pc="${PROXY_CPU[$t]}" -v ec="${ENGINE_CPU[$t]}" \
    'BEGIN { printf "%-11s %12.0f %10d %10d %14.2f %16d %18.1f %19.1f\n", t, r, p50, p99, r / rn,
             p50 - d50, pc, ec }'
done
echo

{
  printf '{\n  "date": "%s",\n  "host": {"cpus": %d, "kernel": "%s"},\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ncpu" "$(uname -r)"
  printf '  "wrk": {"threads": %d, "connections": %d, "duration": "%s", "warmup": "%s"},\n' \
    "$WRK_THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"
  printf '  "proxy_threads": %d, "engine_threads": %d, "pinned": %s,\n' \
    "$PROXY_THREADS" "$ENGINE_THREADS" "$([[ -n $SERVER_CPUS ]] && echo true || echo false)"
  printf '  "request_body_bytes": %d,\n  "targets": {\n' \
    "$(grep -o 'body_bytes=[0-9]*' "$OUT_DIR/wrk-direct.txt" | cut -d= -f2)"
  sep=""
  for t in "${targets[@]}"; do
    printf '%s    "%s": {"requests": %d, "requests_per_s": %s, "p50_us": %d, "p99_us": %d,' \
      "$sep" "$t" "${REQS[$t]}" "${RPS[$t]}" "${P50[$t]}" "${P99[$t]}"
    awk -v r="${RPS[$t]}" -v rn="${RPS[nginx]}" -v p="${P50[$t]}" -v d="${P50[direct]}" \
      -v pc="${PROXY_CPU[$t]}" -v ec="${ENGINE_CPU[$t]}" \
      'BEGIN { printf " \"rps_vs_nginx\": %.3f, \"added_p50_us\": %d, \"proxy_cpu_us_per_request\": %s, \"engine_cpu_us_per_request\": %s}", r / rn, p - d, pc, ec }'
    sep=$',\n'
  done
  printf '\n  }\n}\n'
} >"$OUT_DIR/overhead.json"
log "wrote $OUT_DIR/overhead.json (wrk output in $OUT_DIR/wrk-*.txt)"
