#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU (under 8 minutes on an H100/H200):
# builds what it needs, or takes the binaries scripts/gpu-bundle.sh made elsewhere; runs the gpu
# tests (every kernel against its CPU reference, the cuda device against the cpu device), the
# benchmark (prefixgate-gpu-bench: kernels and the engine against this GPU's measured copy
# bandwidth and bf16 GEMM peak) and the engine serving two requests on --device cuda; writes
# OUT/summary.md, with the logs and JSON beside it (seven files at most).
#
# Usage: scripts/gpu-check.sh [OUT]            OUT defaults to build/gpu-check
#   PREFIXGATE_BUNDLE=DIR|DIR.tar.xz scripts/gpu-check.sh
#       use the binaries of scripts/gpu-bundle.sh DIR instead of building: for GPU hosts that have
#       the CUDA driver and toolkit but not this build's Debian libraries.
# Exit status: 0 when every step passed, 1 when one failed (the summary says which).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary="$out/summary.md"
failed=0
step() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }
note() { echo "$*" >>"$summary"; }

echo "# prefixgate GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')" >"$summary"
note ""
step "the machine"
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader | head -1)
  echo "$gpu"
  note "GPU: $gpu"
else
  note "GPU: nvidia-smi not found"
fi
note "Commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

step "binaries"
if [[ -n ${PREFIXGATE_BUNDLE:-} ]]; then
  bundle=$PREFIXGATE_BUNDLE
  if [[ $bundle == *.tar.xz ]]; then
    unpacked=$(mktemp -d)  # not under OUT: only the logs and the summary belong there
    archive=$(realpath "$bundle")
    (cd "$unpacked" && cmake -E tar xf "$archive") || exit 1  # cmake: no xz binary needed
    bundle=$(find "$unpacked" -mindepth 2 -maxdepth 2 -name bin -type d -printf '%h\n' | head -1)
  fi
  bin="$bundle/bin"
  tests="$bin/kernels_gpu_tests" bench="$bin/prefixgate-gpu-bench" engine="$bin/prefixgate-engine"
  note "Binaries: the bundle in $PREFIXGATE_BUNDLE"
else
  if ! command -v nvcc >/dev/null; then
    echo "gpu-check: nvcc is not on the PATH; build a bundle elsewhere (scripts/gpu-bundle.sh)" >&2
    exit 1
  fi
  cmake --preset release -DPREFIXGATE_CUDA=ON >"$out/configure.log" 2>&1 \
    || { tail -20 "$out/configure.log"; exit 1; }
  cmake --build --preset release -j "$(nproc)" \
    --target kernels_gpu_tests prefixgate-gpu-bench prefixgate-engine >"$out/build.log" 2>&1 \
    || { tail -40 "$out/build.log"; exit 1; }
  tests=build/release/tests/kernels_gpu_tests
  bench=build/release/tools/prefixgate-gpu-bench/prefixgate-gpu-bench
  engine=build/release/engine/prefixgate-engine
  note "Binaries: built here (build/release)"
fi

step "gpu tests"
timeout 150 "$tests" >"$out/gpu_tests.log" 2>&1
status=$?
tail -3 "$out/gpu_tests.log"
passed=$(grep -c '^\[       OK \]' "$out/gpu_tests.log")
skipped=$(grep -c '^\[  SKIPPED \]' "$out/gpu_tests.log")
failures=$(grep '^\[  FAILED  \]' "$out/gpu_tests.log" | grep -v 'listed below' | sort -u)
note ""
note "## GPU tests: $passed passed, $skipped skipped, exit status $status"
if ((status != 0 || skipped > 0)); then
  failed=1
  note '```'
  note "${failures:-$(tail -5 "$out/gpu_tests.log")}"
  grep -m3 -A1 'Skipped' "$out/gpu_tests.log" >>"$summary"
  note '```'
fi

step "benchmark"
timeout 240 "$bench" --json "$out/bench.json" 2>&1 | tee "$out/bench.log"
status=${PIPESTATUS[0]}
note ""
note "## prefixgate-gpu-bench (exit status $status)"
note '```'
cat "$out/bench.log" >>"$summary"
note '```'
((status == 0)) || failed=1
if [[ -s $out/bench.json ]]; then
  # The GPU targets (kernels/README.md), read off the benchmark's JSON.
  python3 - "$out/bench.json" >"$out/targets.md" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
def pick(group, test):
    return [r for r in rows if r["group"] == group and test(r["name"])]
def line(what, found, aim, key):
    if not found:
        return f"| {what} | not measured | {aim} | - |"
    worst = min(found, key=key)
    value = key(worst)
    ok = value >= float(aim.split()[1].rstrip("%x")) / (100 if aim.endswith("%") else 1)
    shown = f"{value:.1%}" if aim.endswith("%") else f"{value:.1f}x"
    return f"| {what} | {shown} (worst: {worst['name']}) | {aim} | {'met' if ok else 'missed'} |"
frac = lambda r: r.get("fraction", 0.0)
print("| target | measured | aim | |")
print("|---|---|---|---|")
print(line("decode attention, contexts >= 8k, of copy bandwidth",
           pick("decode_attention", lambda n: " ctx 8192 " in n or " ctx 32768 " in n), ">= 80%", frac))
print(line("batch-1 decode, of the weight-bandwidth roofline",
           pick("engine", lambda n: n == "batch-1 decode"), ">= 80%", frac))
print(line("GEMMs at prefill sizes, of the bf16 peak", pick("gemm", lambda n: True), ">= 60%", frac))
print(line("TTFT, cold over an 8k cached prefix",
           pick("engine", lambda n: n.startswith("TTFT speedup")), ">= 5x", lambda r: r["value"]))
PY
  note ""
  note "## GPU targets"
  cat "$out/targets.md" >>"$summary"
fi

step "the engine on --device cuda"
"$engine" --model builtin:small --device cuda --port 0 --gpu-memory-utilization 0.2 \
  >"$out/engine.log" 2>&1 &
engine_pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/^listening on http:\/\/[^:]*:\([0-9]*\)$/\1/p' "$out/engine.log")
  [[ -n $port ]] && break
  kill -0 $engine_pid 2>/dev/null || break
  sleep 0.1
done
if [[ -z $port ]]; then
  note ""
  note "## Engine: did not start"
  note '```'
  tail -5 "$out/engine.log" >>"$summary"
  note '```'
  failed=1
else
  # The same long prompt twice: the second must be served from the cache.
  python3 - "$port" >"$out/engine_requests.log" 2>&1 <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
system = "You are a careful assistant. " * 60
def ask(question):
    body = json.dumps({"model": "builtin:small", "max_tokens": 16, "temperature": 0,
                       "messages": [{"role": "system", "content": system},
                                    {"role": "user", "content": question}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)
first, second = ask("first question"), ask("second question")
for name, r in (("first", first), ("second", second)):
    u = r["usage"]
    print(f"{name}: prompt_tokens={u['prompt_tokens']} "
          f"cached_tokens={u.get('prompt_tokens_details', {}).get('cached_tokens')} "
          f"completion_tokens={u['completion_tokens']}")
cached = second["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
sys.exit(0 if cached > 0 and second["usage"]["completion_tokens"] > 0 else 1)
PY
  status=$?
  note ""
  note "## Engine on --device cuda (builtin:small), two requests sharing a system prompt: exit status $status"
  note '```'
  cat "$out/engine_requests.log" >>"$summary"
  grep -m2 -E 'cuda device|KV pages' "$out/engine.log" >>"$summary"
  note '```'
  ((status == 0)) || failed=1
  kill -TERM $engine_pid 2>/dev/null
  wait $engine_pid 2>/dev/null
fi

note ""
note "Total: $((SECONDS / 60)) min $((SECONDS % 60)) s; result: $( ((failed == 0)) && echo PASS || echo FAIL)"
step "done: $summary"
cat "$summary"
exit $failed
