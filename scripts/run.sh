#!/usr/bin/env bash
# The main job on embedded defaults: three prefixgate-engine replicas (two on the cpu device
# with builtin:small, one on the sim device modelling Llama-3-8B on an H100), a demo of their
# prefix cache, and prefixlint on the bundled examples. The replicas keep serving until Ctrl-C.
# When the gateway lands, it starts in front of these replicas.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target prefixlint prefixgate-engine
lint=build/release/tools/prefixlint/prefixlint
engine=build/release/engine/prefixgate-engine
host=127.0.0.1
ports=(9001 9002 9003)

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "prefixlint: what breaks prompt prefixes in the bundled examples"
"$lint" check --fail-on error examples/prompts/support-agent.json examples/prompts/system-prompt.txt || true
"$lint" diff examples/prompts/agent-tools-v1.json examples/prompts/agent-tools-v2.json || true
"$lint" log examples/logs/traffic.jsonl || true

say "starting replicas on ${ports[*]}"
mkdir -p build/run
pids=()
cleanup() { ((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 0' INT TERM
"$engine" --model builtin:small --device cpu --host $host --port ${ports[0]} >build/run/engine-${ports[0]}.log 2>&1 &
pids+=($!)
"$engine" --model builtin:small --device cpu --host $host --port ${ports[1]} >build/run/engine-${ports[1]}.log 2>&1 &
pids+=($!)
"$engine" --model builtin:small --device sim --sim-profile h100:llama3-8b --sim-speedup 1 \
  --host $host --port ${ports[2]} >build/run/engine-${ports[2]}.log 2>&1 &
pids+=($!)
for port in "${ports[@]}"; do
  for _ in $(seq 100); do
    curl -sf "http://$host:$port/health" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://$host:$port/health" >/dev/null || { cat build/run/engine-$port.log; exit 1; }
done

# A 2,000-token system prompt sent twice with different questions: the second request's usage
# shows the prefix served from the cache, and its time to answer drops accordingly.
system=$(printf 'You are the support assistant of Acme Cloud. Answer in two sentences. %.0s' $(seq 28))
ask() {
  curl -s -o /dev/stderr -w '%{time_total}' "http://$host:$1/v1/chat/completions" \
    -H 'content-type: application/json' \
    -d "{\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"$2\"}],\"max_tokens\":1}" \
    2> >(grep -o '"usage":{.*}}' >&2)
}
for port in "${ports[@]}"; do
  say "replica :$port, the same system prompt twice"
  t1=$(ask "$port" "How do I reset my password?")
  echo "  first request:  ${t1}s"
  t2=$(ask "$port" "Can I change my plan?")
  echo "  second request: ${t2}s"
done

say "serving (Ctrl-C to stop). Try:"
cat <<HELP
  curl -s http://$host:9001/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
  curl -sN http://$host:9001/v1/kv_events        # the cache, as a gateway follows it
  curl -s http://$host:9001/metrics | grep prefix  # prefix-cache hit counters
  logs: build/run/engine-*.log
HELP
wait
