# shellcheck shell=bash
# Shared by the measuring scripts beside it (`source` it, do not run it): a temporary folder and
# the processes a script starts, both cleaned up when it exits, free loopback ports, waiting for
# a server to answer, and the nginx the scripts compare the gateway with.
#
#   source "$HERE/script_lib.sh"
#   script_start prefixgate-instr     # sets TMP (/tmp/prefixgate-instr.XXXXXX) and pids=()
#   some_server --port "$(free_port)" & pids+=($!)
#   wait_ready "$port"                # GET /health answers, or the script exits
#   start_nginx "$nginx_port" "$engine_port" single   # sets NGINX_PID (its serving process)
#                                     # NGINX_PROXY_BUFFERING=off: answers forwarded as they come

# Exits with status 2 unless every command named is on PATH.
require_tools() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$(basename "$0"): needs $tool" >&2; exit 2; }
  done
}

# Sets GATEWAYS to the gateway targets given (this build's when none is), GATEWAY_NAMES to their
# names, and checks that each binary and $ENGINE exist; exits with status 2 otherwise. Needs ROOT
# and ENGINE set. A target is one word: a binary's path, optionally followed by extra gateway
# arguments and preceded by a name, e.g. "nocache=build/release/gateway/prefixgate
# --tokenizer-cache off"; unnamed targets are gateway0, gateway1, ... Start target I with
#   read -r -a cmd <<<"${GATEWAYS[I]}"; "${cmd[@]}" --listen ...
gateway_binaries() {
  GATEWAYS=()
  GATEWAY_NAMES=()
  local targets=("$@") target name
  [[ ${#targets[@]} -gt 0 ]] || targets=("$ROOT/build/release/gateway/prefixgate")
  [[ -x $ENGINE ]] || { echo "$(basename "$0"): build the release preset first" >&2; exit 2; }
  for target in "${targets[@]}"; do
    name="gateway${#GATEWAYS[@]}"
    if [[ $target =~ ^([A-Za-z0-9_.-]+)=(.*)$ ]]; then
      name="${BASH_REMATCH[1]}"
      target="${BASH_REMATCH[2]}"
    fi
    [[ $name != nginx ]] || { echo "$(basename "$0"): nginx is the comparison's own name" >&2; exit 2; }
    [[ -x ${target%% *} ]] || { echo "$(basename "$0"): no gateway binary at ${target%% *}" >&2; exit 2; }
    GATEWAYS+=("$target")
    GATEWAY_NAMES+=("$name")
  done
}

script_start() {
  TMP="$(mktemp -d "/tmp/$1.XXXXXX")"
  pids=()
  trap script_cleanup EXIT
}

script_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Polls http://127.0.0.1:PORT/health for up to 10 s; exits the script when nothing answers.
wait_ready() {
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$1/health" && return 0
    sleep 0.1
  done
  echo "$(basename "$0"): nothing answers on port $1" >&2
  exit 1
}

# nginx on 127.0.0.1:PORT proxying to 127.0.0.1:ENGINE_PORT over a keep-alive upstream pool, its
# files under $TMP/nginx. MODE "single": one process, no master (it serves itself); "worker": a
# master and one worker. Run under $PREFIX when set (e.g. PREFIX="taskset -c 0"). Sets NGINX_PID
# to the process that serves.
start_nginx() {
  local port=$1 engine_port=$2 mode=$3 master=""
  [[ $mode == single ]] && master="master_process off;"
  mkdir -p "$TMP/nginx"
  cat >"$TMP/nginx/nginx.conf" <<CONF
worker_processes 1;
$master
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
  client_body_buffer_size 1m;
  keepalive_requests 1000000;
  upstream engine { server 127.0.0.1:$engine_port; keepalive 64; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$port;
    location / { proxy_pass http://engine; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_buffering ${NGINX_PROXY_BUFFERING:-on}; }
  }
}
CONF
  # shellcheck disable=SC2086 # PREFIX is a command and its words
  ${PREFIX:-} nginx -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx/nginx.conf" &
  pids+=($!)
  for _ in $(seq 100); do [[ -s $TMP/nginx/nginx.pid ]] && break; sleep 0.1; done
  sleep 0.3
  NGINX_PID="$(cat "$TMP/nginx/nginx.pid")"
  if [[ $mode == worker ]]; then NGINX_PID="$(pgrep -P "$NGINX_PID" | head -1)"; fi
  [[ -n $NGINX_PID ]] || { echo "$(basename "$0"): nginx did not start" >&2; exit 1; }
}
