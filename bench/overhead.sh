#!/usr/bin/env bash
# bench/overhead.sh: the gateway's overhead with a fast upstream (direct vs nginx vs prefixgate),
# now `prefixgate-bench overhead` (tools/bench/overhead.cpp). This wrapper installs wrk and nginx
# when missing (benchmark only: apt-get), builds the release targets and maps the environment
# settings it always took onto the command's flags:
#   DURATION [10s] WARMUP [3s] CONNECTIONS [16] WRK_THREADS [1] PROXY_THREADS [1]
#   ENGINE_THREADS [1] PIN [1] PROFILE [0] GATEWAY_ARGS [] BUILD_DIR [build/release]
# Output: a table, build/bench/overhead.json, wrk's output in build/bench/wrk-*.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/release}"

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null && [[ -x "$(command -v nginx)" ]] || missing+=(nginx)
if ((${#missing[@]})); then
  echo "overhead.sh: installing ${missing[*]} with apt-get (benchmark only)" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
    >/dev/null
fi
[[ -f "$BUILD_DIR/build.ninja" ]] || cmake --preset release -S "$ROOT" >/dev/null
cmake --build "$BUILD_DIR" --target prefixgate-bench prefixgate prefixgate-engine >/dev/null

args=(overhead --duration "${DURATION:-10s}" --warmup "${WARMUP:-3s}"
  --connections "${CONNECTIONS:-16}" --wrk-threads "${WRK_THREADS:-1}"
  --proxy-threads "${PROXY_THREADS:-1}" --engine-threads "${ENGINE_THREADS:-1}"
  --out-dir "$ROOT/build/bench" --lua "$ROOT/bench/overhead_request.lua")
[[ ${PIN:-1} == 1 ]] || args+=(--no-pin)
[[ ${PROFILE:-0} == 0 ]] || args+=(--profile)
for a in ${GATEWAY_ARGS:-}; do args+=("--gateway-arg=$a"); done
exec "$BUILD_DIR/tools/bench/prefixgate-bench" "${args[@]}"
