#!/usr/bin/env bash
# gateway_instructions.sh: instructions the gateway executes per proxied request, counted by
# valgrind's callgrind. Unlike requests/s or CPU time this does not move when the machine is
# busy, so two builds can be compared on a shared host (same binary and input: same count).
#
# Usage: tools/prefixgate-bench/gateway_instructions.sh [GATEWAY_BINARY]   (default build/release/gateway/prefixgate)
# It starts a prefixgate-engine (sim device, no simulated GPU time) and the gateway under
# callgrind on free loopback ports, warms up with wrk for 4 s, zeroes the counters, drives the
# overhead_request.lua request (beside this script) for 8 s with 4 connections, and prints
#   requests=N instructions=I instructions_per_request=I/N
# The callgrind profile stays in build/results/callgrind.gateway.out for callgrind_annotate.
#
# Environment, for other requests and models (the defaults measure the 3 KB chat request):
#   LUA=PATH              the wrk script (e.g. overhead_agent.lua, with its TURNS)
#   ENGINE_ARGS="..."     more prefixgate-engine arguments (e.g. --tokenizer F --chat-template T)
#   GATEWAY_ARGS="..."    more gateway arguments (e.g. --config overhead_llama3.yaml)
#   UPSTREAM_KEYS=";k=v"  upstream keys after the engine's URL (e.g. ";kind=openai": an upstream
#                         that speaks only Chat Completions, so other APIs are translated)
#   SIM_SPEEDUP=N         the engine's --sim-speedup (default inf: answers at once). A streamed
#                         answer comes as one event a token only when the engine runs in modelled
#                         time (e.g. 1, with overhead_stream.lua)
#   CACHE_SIM=1           also simulate the data caches (callgrind --cache-sim; about 1.5x slower)
#                         and print the misses per request, reads and writes together:
#                           d1_misses_per_request=M ll_misses_per_request=L
#                         of a modelled 48 KB 12-way L1d and, as the last level, a 2 MB 16-way L2
#                         (CACHE_D1 / CACHE_LL override them, as valgrind's size,assoc,line). An
#                         instruction that misses costs more than one that hits: a pass over a
#                         long prompt's bytes (a copy, a comparison) is few instructions and many
#                         misses, which instruction counts alone do not show.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
GATEWAY="${1:-$ROOT/build/release/gateway/prefixgate}"
ENGINE="$ROOT/build/release/engine/prefixgate-engine"
for tool in valgrind callgrind_control callgrind_annotate wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "gateway_instructions.sh: needs $tool" >&2; exit 2; }
done
[[ -x $GATEWAY && -x $ENGINE ]] || { echo "gateway_instructions.sh: build the release preset first" >&2; exit 2; }

cache_sim=()
if [[ ${CACHE_SIM:-0} == 1 ]]; then
  for geometry in "${CACHE_D1:-49152,12,64}" "${CACHE_LL:-2097152,16,64}"; do
    [[ $geometry =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || {
      echo "gateway_instructions.sh: a cache is SIZE,ASSOC,LINE in bytes (e.g. 49152,12,64), not '$geometry'" >&2
      exit 2
    }
  done
  cache_sim=(--cache-sim=yes "--D1=${CACHE_D1:-49152,12,64}" "--LL=${CACHE_LL:-2097152,16,64}")
fi

OUT="$ROOT/build/results"
mkdir -p "$OUT"
# shellcheck source=tools/prefixgate-bench/script_lib.sh
source "$HERE/script_lib.sh"
script_start prefixgate-instr
ENGINE_PORT="$(free_port)"
GATEWAY_PORT="$(free_port)"

"$ENGINE" --device sim --sim-speedup "${SIM_SPEEDUP:-inf}" --model builtin:tiny --host 127.0.0.1 \
  --port "$ENGINE_PORT" --threads 1 --log-level warn ${ENGINE_ARGS:-} >"$TMP/engine.log" 2>&1 &
pids+=($!)
# glibc copies and fills more than a few KB with `rep movsb`/`rep stosb`, which callgrind counts
# as one instruction per byte: a 120 KB copy would weigh 120,000 instructions, as much as hashing
# it. With the threshold out of reach glibc's vector loops run instead, counted as what they do
# (about 32 bytes an instruction), so a copy weighs what it costs beside the code around it.
GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.cpu.x86_rep_movsb_threshold=2147483647:glibc.cpu.x86_rep_stosb_threshold=2147483647}" \
valgrind --tool=callgrind "${cache_sim[@]}" --callgrind-out-file="$TMP/callgrind.out" "$GATEWAY" \
  --listen "127.0.0.1:$GATEWAY_PORT" --upstream "http://127.0.0.1:$ENGINE_PORT${UPSTREAM_KEYS:-}" --threads 1 \
  --log-level warn ${GATEWAY_ARGS:-} >"$TMP/gateway.log" 2>&1 &
GATEWAY_PID=$!
pids+=("$GATEWAY_PID")
for _ in $(seq 200); do
  curl -sf -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/health" && break
  sleep 0.2
done

LUA="${LUA:-$HERE/overhead_request.lua}"
wrk -t1 -c4 -d4s -s "$LUA" "http://127.0.0.1:$GATEWAY_PORT" >/dev/null
callgrind_control -z "$GATEWAY_PID" >/dev/null 2>&1
line="$(wrk -t1 -c4 -d8s -s "$LUA" "http://127.0.0.1:$GATEWAY_PORT" | grep '^PGBENCH')"
callgrind_control -d "$GATEWAY_PID" >/dev/null 2>&1
sleep 1
[[ $line == *" errors=0 non2xx=0 "* ]] || { echo "gateway_instructions.sh: failures: $line" >&2; exit 1; }
requests="$(grep -o 'requests=[0-9]*' <<<"$line" | cut -d= -f2)"
# The dump after zeroing is the profile's first part (.1): exactly the measured requests.
cp "$TMP/callgrind.out.1" "$OUT/callgrind.gateway.out"
# The totals line lists every event in the order of the `events:` line (Ir, and with the cache
# simulation Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw).
totals="$(callgrind_annotate "$OUT/callgrind.gateway.out" 2>/dev/null |
  awk '/PROGRAM TOTALS/ { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9,]+$/) { gsub(",", "", $i); printf "%s ", $i }; exit }')"
events="$(awk '/^events:/ { $1 = ""; print; exit }' "$OUT/callgrind.gateway.out")"
read -r -a names <<<"$events"
read -r -a counts <<<"$totals"
declare -A total=()
for i in "${!names[@]}"; do total[${names[$i]}]=${counts[$i]:-0}; done
instructions=${total[Ir]}
line="requests=$requests instructions=$instructions instructions_per_request=$((instructions / requests))"
if [[ -n ${total[D1mr]:-} ]]; then
  d1=$((total[D1mr] + total[D1mw]))
  ll=$((total[DLmr] + total[DLmw]))
  line+=" d1_misses_per_request=$((d1 / requests)) ll_misses_per_request=$((ll / requests))"
fi
echo "$line"
