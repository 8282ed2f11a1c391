#!/usr/bin/env bash
# cpu_split.sh: user and kernel CPU per proxied request of one or more gateway builds and of
# nginx, measured in turns against one engine, so that a busy moment disturbs all of them alike.
# `prefixgate-bench overhead` runs each target once for long; on a shared host its runs move by
# tens of percent. Here each target gets a short run per round, in the same order every round.
#
# Usage: tools/prefixgate-bench/cpu_split.sh [TARGET...]   (default build/release/gateway/prefixgate)
# A target is a gateway binary, as one word optionally named and with extra arguments for that
# gateway alone: "nocache=build/release/gateway/prefixgate --tokenizer-cache off". Unnamed
# targets are gateway0, gateway1, ...
# Prints one line per target and round:
#   NAME user U sys S total T us/req requests=N rps=R p50_us=P
# and, after the last round, a line per target with the medians over the rounds of its CPU per
# request and of its ratio, round by round, to nginx's and to the first target's (on a host whose
# speed moves from minute to minute, the ratio within a round is the number that holds still):
#   median NAME T us/req, Xx nginx, Yx FIRST (N rounds)
# CPU comes from /proc/PID/stat (utime and stime, in clock ticks) before and after the run. The
# gateways and nginx (one worker, an upstream keep-alive pool) share CPU 0; the engine and wrk
# share CPU 1. Needs a second CPU, nginx and wrk.
#
# Environment:
#   LUA=PATH          the wrk script (default overhead_request.lua beside this script: the 3 KB chat)
#   ROUNDS=N          rounds (default 3)
#   CONNS=N           wrk connections (default 4)
#   SECONDS_EACH=N    wrk run per target and round (default 4)
#   ENGINE_ARGS="..." more prefixgate-engine arguments (e.g. --max-model-len 65536 for TURNS=10)
#   SIM_SPEEDUP=N     the engine's --sim-speedup (default inf: answers at once; 1 streams a token
#                     per event in modelled time, for overhead_stream.lua)
#   UPSTREAM_KEYS=";k=v" upstream keys after the engine's URL for every gateway (";kind=openai":
#                     a chat-only upstream, so Messages and Responses requests are translated)
#   NGINX_PROXY_BUFFERING=off   nginx forwards an answer as it comes, as LLM deployments set it
#                     for streams (default on, nginx's own)
#   GATEWAY_ARGS="..." more arguments for every gateway
#   TURNS_LIST="A B"  with overhead_agent.lua: each round runs every target at each of these
#                     conversation lengths (TURNS), so that a long prompt's cost is read against
#                     a short one's in the same rounds; names get "/tA", and the summary adds
#                     each target's median ratio, round by round, of the last length to the first
#                     and compares each name with nginx at the same length
#   JSON=FILE         also writes every round's CPU per request in Google Benchmark's JSON shape
#                     (a run NAME/tTURNS per round, its body size as the counter body_bytes), for
#                     `prefixgate-bench cost-chart --input FILE --x body_bytes`: each target's
#                     CPU per request against the request's length
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENGINE="$ROOT/build/release/engine/prefixgate-engine"
# shellcheck source=tools/prefixgate-bench/script_lib.sh
source "$HERE/script_lib.sh"
require_tools nginx wrk curl python3 taskset
[[ $(nproc) -ge 2 ]] || { echo "cpu_split.sh: needs two CPUs" >&2; exit 2; }
gateway_binaries "$@"

LUA="${LUA:-$HERE/overhead_request.lua}"
TICK_US=$((1000000 / $(getconf CLK_TCK)))
script_start prefixgate-cpu
ENGINE_PORT="$(free_port)"
taskset -c 1 "$ENGINE" --device sim --sim-speedup "${SIM_SPEEDUP:-inf}" --model builtin:tiny --host 127.0.0.1 \
  --port "$ENGINE_PORT" --threads 1 --log-level warn ${ENGINE_ARGS:-} >"$TMP/engine.log" 2>&1 &
pids+=($!)
wait_ready "$ENGINE_PORT"

names=()
server_pids=()
ports=()
for i in "${!GATEWAYS[@]}"; do
  port="$(free_port)"
  read -r -a cmd <<<"${GATEWAYS[$i]}"
  taskset -c 0 "${cmd[@]}" --listen "127.0.0.1:$port" --upstream "http://127.0.0.1:$ENGINE_PORT${UPSTREAM_KEYS:-}" \
    --threads 1 --log-level warn ${GATEWAY_ARGS:-} >"$TMP/gateway$i.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_ready "$port"
  names+=("${GATEWAY_NAMES[$i]}")
  server_pids+=("$pid")
  ports+=("$port")
  echo "${GATEWAY_NAMES[$i]}: ${GATEWAYS[$i]}"
done

NGINX_PORT="$(free_port)"
PREFIX="taskset -c 0" start_nginx "$NGINX_PORT" "$ENGINE_PORT" worker
NGINX_WORKER="$NGINX_PID"
names+=("nginx")
server_pids+=("$NGINX_WORKER")
ports+=("$NGINX_PORT")

cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
read -r -a turns_list <<<"${TURNS_LIST:-}"
((${#turns_list[@]})) || turns_list=("")
for _ in $(seq "${ROUNDS:-3}"); do
  for turns in "${turns_list[@]}"; do
    if [[ -n $turns ]]; then export TURNS="$turns"; fi
    for i in "${!names[@]}"; do
      url="http://127.0.0.1:${ports[$i]}"
      name="${names[$i]}${turns:+/t$turns}"
      taskset -c 1 wrk -t1 -c"${CONNS:-4}" -d1s -s "$LUA" "$url" >/dev/null  # warm-up
      read -r user0 sys0 < <(cpu_ticks "${server_pids[$i]}")
      line="$(taskset -c 1 wrk -t1 -c"${CONNS:-4}" -d"${SECONDS_EACH:-4}s" -s "$LUA" "$url" | grep '^PGBENCH')"
      read -r user1 sys1 < <(cpu_ticks "${server_pids[$i]}")
      [[ $line == *" errors=0 non2xx=0 "* ]] || { echo "cpu_split.sh: failures: $line" >&2; exit 1; }
      n="$(grep -o 'requests=[0-9]*' <<<"$line" | cut -d= -f2)"
      awk -v name="$name" -v u=$((user1 - user0)) -v s=$((sys1 - sys0)) -v n="$n" \
        -v tick="$TICK_US" \
        -v rest="$(grep -o 'rps=[0-9.]* \|p50_us=[0-9]*\| body_bytes=[0-9]*' <<<"$line" | tr -d '\n')" \
        'BEGIN { printf "%-9s user %5.1f sys %5.1f total %5.1f us/req requests=%d %s\n",
                 name, u * tick / n, s * tick / n, (u + s) * tick / n, n, rest }' |
        tee -a "$TMP/rounds.txt"
    done
  done
done

# Medians over the rounds: of each target's CPU per request, and of its ratio to nginx's and to
# gateway0's in the same round.
python3 - "$TMP/rounds.txt" "${TURNS_LIST:-}" "${names[0]}" "${JSON:-}" <<'PY'
import json
import statistics
import sys

rounds = {}
body_bytes = {}
for line in open(sys.argv[1]):
    fields = line.split()
    name, total = fields[0], float(fields[6])
    rounds.setdefault(name, []).append(total)
    for field in fields:
        if field.startswith("body_bytes="):
            body_bytes[name] = int(field.split("=")[1])
lengths, first_target, json_path = sys.argv[2].split(), sys.argv[3], sys.argv[4]
for name, totals in rounds.items():
    suffix = name[name.index("/"):] if "/" in name else ""
    ratio = {ref: statistics.median(t / r for t, r in zip(totals, rounds[ref + suffix]))
             for ref in ("nginx", first_target)}
    print(f"median {name:<13} {statistics.median(totals):5.1f} us/req, "
          f"{ratio['nginx']:.3f}x nginx{suffix}, {ratio[first_target]:.3f}x {first_target}{suffix} "
          f"({len(totals)} rounds)")
if json_path:
    runs = []
    for name, totals in rounds.items():
        if name not in body_bytes:
            sys.exit(f"cpu_split.sh: JSON needs the body size, which {name}'s wrk script does not print")
        for total in totals:
            runs.append({"name": name, "run_name": name, "run_type": "iteration",
                         "cpu_time": total, "real_time": total, "time_unit": "us",
                         "iterations": 1, "body_bytes": body_bytes[name]})
    with open(json_path, "w") as out:
        json.dump({"context": {"executable": "cpu_split.sh"}, "benchmarks": runs}, out, indent=1)
    print(f"wrote {json_path}")
if len(lengths) >= 2:
    first, last = lengths[0], lengths[-1]
    for base in dict.fromkeys(name.split("/")[0] for name in rounds):
        pairs = zip(rounds[f"{base}/t{last}"], rounds[f"{base}/t{first}"])
        print(f"median {base:<13} TURNS={last} / TURNS={first}: "
              f"{statistics.median(a / b for a, b in pairs):.3f}x ({len(rounds[base + '/t' + last])} rounds)")
PY
