#!/usr/bin/env bash
# The main job on embedded defaults: the prefixgate gateway on 127.0.0.1:8080 in front of three
# prefixgate-engine replicas (two on the cpu device with builtin:small, one on the sim device
# modelling Llama-3-8B on an H100), a demo of cache-aware routing, and prefixlint on the bundled
# examples. Everything keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target prefixlint prefixgate-engine prefixgate
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

say "starting the gateway on $host:8080 in front of them (cache_aware routing)"
gateway=build/release/gateway/prefixgate
# Tenants from the x-tenant header, so the dashboard can show each app's hit rate.
printf 'tenant_header: x-tenant\n' >build/run/gateway.yaml
"$gateway" --config build/run/gateway.yaml --listen $host:8080 --policy cache_aware \
  --upstream "http://$host:${ports[0]}" --upstream "http://$host:${ports[1]}" \
  --upstream "http://$host:${ports[2]}" >build/run/gateway.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://$host:8080/health" >/dev/null && break
  sleep 0.1
done
curl -sf "http://$host:8080/health" >/dev/null || { cat build/run/gateway.log; exit 1; }

# Three apps, each with its own ~2,000-token system prompt, ask two questions each through the
# gateway: an app's requests land on the replica that already holds its prompt, and the second
# request's usage shows the prefix served from that replica's cache.
ask() {  # app-number question
  local system
  system=$(printf "You are assistant number $1 of Acme Cloud. Answer in two sentences. %.0s" $(seq 28))
  curl -s -D build/run/headers -o build/run/body "http://$host:8080/v1/chat/completions" \
    -H 'content-type: application/json' -H "x-tenant: app-$1" \
    -d "{\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"$2\"}],\"max_tokens\":1}"
  printf '  app %s -> %-22s %-32s %s\n' "$1" \
    "$(grep -i '^x-prefixgate-replica' build/run/headers | cut -d' ' -f2 | tr -d '\r')" \
    "$(grep -io '^x-prefixgate-route-reason: .*' build/run/headers | cut -d' ' -f2 | tr -d '\r')" \
    "$(grep -o '"cached_tokens":[0-9]*' build/run/body)"
}
say "three apps, two questions each, through the gateway"
for app in 1 2 3; do ask $app "How do I reset my password?"; done
for app in 1 2 3; do ask $app "Can I change my plan?"; done
say "hit rate as the gateway's /metrics reports it"
# The gateway inherits PREFIXGATE_ADMIN_KEY when it is set: /metrics then wants it.
admin_auth=()
[[ -n "${PREFIXGATE_ADMIN_KEY:-}" ]] && admin_auth=(-H "Authorization: Bearer $PREFIXGATE_ADMIN_KEY")
curl -s "${admin_auth[@]}" "http://$host:8080/metrics" |
  grep -E '^prefixgate_(prompt|cached)_tokens_total' || true

say "serving (Ctrl-C to stop). Live dashboard: http://$host:8080/dashboard"
cat <<HELP
  open http://$host:8080/dashboard in a browser, then send some traffic and watch the hit rate:
    for i in \$(seq 20); do curl -s http://$host:8080/v1/chat/completions -H 'x-tenant: demo' \\
      -d '{"messages":[{"role":"system","content":"You are a helpful assistant for Acme. Be brief."},{"role":"user","content":"Question '\$i'"}],"max_tokens":4,"stream":true}' >/dev/null; done
  curl -s http://$host:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
  OpenAI SDK: base URL http://$host:8080/v1 (any api key)
  curl -s http://$host:8080/metrics | grep -E 'cached|route'   # hit rate and routing decisions
  curl -s http://$host:8080/stats                               # the dashboard's data (gateway/STATS.md)
  (with PREFIXGATE_ADMIN_KEY set: sign in at /admin/login, curl with -H 'Authorization: Bearer KEY')
  curl -sN http://$host:9001/v1/kv_events                       # a replica's cache, as the gateway follows it
  logs: build/run/gateway.log, build/run/engine-*.log
HELP
wait
