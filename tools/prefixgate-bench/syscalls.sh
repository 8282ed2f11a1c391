#!/usr/bin/env bash
# syscalls.sh: system calls per proxied request of one or more gateway builds and of nginx, in
# turns against one engine, counted by the kernel's syscall tracepoints (perf stat). On a host
# where a system call is dear (a virtual machine: each one exits to the hypervisor's interrupt
# handling) they are most of a proxy's kernel time, and unlike CPU time they barely move when
# the host is busy.
#
# Usage: tools/prefixgate-bench/syscalls.sh [GATEWAY_BINARY...]   (default build/release/gateway/prefixgate)
# Prints one line per target:
#   NAME requests=N per_request: recv R send S epoll_wait W epoll_ctl C total T
# `recv` counts recvfrom and recvmsg, `send` sendmsg, sendto, writev and write (nginx writes
# with writev, the gateway with sendmsg). Needs perf with tracepoint access (root), nginx and
# wrk.
#
# Environment: LUA (the wrk script, default overhead_request.lua), CONNS (default 4),
# SECONDS_EACH (default 4), ENGINE_ARGS, GATEWAY_ARGS, as cpu_split.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENGINE="$ROOT/build/release/engine/prefixgate-engine"
# shellcheck source=tools/prefixgate-bench/script_lib.sh
source "$HERE/script_lib.sh"
require_tools perf nginx wrk curl python3
gateway_binaries "$@"
perf stat -e syscalls:sys_enter_recvfrom -o /dev/null -- true 2>/dev/null ||
  { echo "syscalls.sh: perf cannot read syscall tracepoints here (needs root)" >&2; exit 2; }

LUA="${LUA:-$HERE/overhead_request.lua}"
SECONDS_EACH="${SECONDS_EACH:-4}"
script_start prefixgate-syscalls
ENGINE_PORT="$(free_port)"
"$ENGINE" --device sim --sim-speedup inf --model builtin:tiny --host 127.0.0.1 \
  --port "$ENGINE_PORT" --threads 1 --log-level warn ${ENGINE_ARGS:-} >"$TMP/engine.log" 2>&1 &
pids+=($!)
wait_ready "$ENGINE_PORT"

EVENTS=""
for call in recvfrom recvmsg sendmsg sendto writev write epoll_wait epoll_ctl; do
  EVENTS+="${EVENTS:+,}syscalls:sys_enter_$call"
done

# Counts one server process's system calls while wrk drives `url`; prints the line.
measure() {
  local name=$1 pid=$2 url=$3
  wrk -t1 -c"${CONNS:-4}" -d1s -s "$LUA" "$url" >/dev/null  # warm-up
  perf stat -x, -e "$EVENTS" -p "$pid" -o "$TMP/perf.txt" -- sleep "$((SECONDS_EACH + 1))" &
  local perf_pid=$!
  sleep 0.5
  local line
  line="$(wrk -t1 -c"${CONNS:-4}" -d"${SECONDS_EACH}s" -s "$LUA" "$url" | grep '^PGBENCH')"
  wait "$perf_pid"
  [[ $line == *" errors=0 non2xx=0 "* ]] || { echo "syscalls.sh: failures: $line" >&2; exit 1; }
  python3 - "$name" "$TMP/perf.txt" "$line" <<'EOF'
import re, sys
name, path, line = sys.argv[1], sys.argv[2], sys.argv[3]
requests = int(re.search(r"requests=(\d+)", line).group(1))
counts = {}
for row in open(path):
    parts = row.strip().split(",")
    if len(parts) > 2 and parts[2].startswith("syscalls:sys_enter_"):
        counts[parts[2][len("syscalls:sys_enter_"):]] = int(parts[0]) if parts[0].isdigit() else 0
def per(*calls):
    return sum(counts.get(c, 0) for c in calls) / requests
recv, send = per("recvfrom", "recvmsg"), per("sendmsg", "sendto", "writev", "write")
wait, ctl = per("epoll_wait"), per("epoll_ctl")
print(f"{name:9s} requests={requests} per_request: recv {recv:.2f} send {send:.2f} "
      f"epoll_wait {wait:.2f} epoll_ctl {ctl:.2f} total {recv + send + wait + ctl:.2f}")
EOF
}

for i in "${!GATEWAYS[@]}"; do
  port="$(free_port)"
  read -r -a cmd <<<"${GATEWAYS[$i]}"
  "${cmd[@]}" --listen "127.0.0.1:$port" --upstream "http://127.0.0.1:$ENGINE_PORT" \
    --threads 1 --log-level warn ${GATEWAY_ARGS:-} >"$TMP/gateway$i.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_ready "$port"
  echo "${GATEWAY_NAMES[$i]}: ${GATEWAYS[$i]}"
  measure "${GATEWAY_NAMES[$i]}" "$pid" "http://127.0.0.1:$port"
done

NGINX_PORT="$(free_port)"
start_nginx "$NGINX_PORT" "$ENGINE_PORT" single
measure nginx "$NGINX_PID" "http://127.0.0.1:$NGINX_PORT"
