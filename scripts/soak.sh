#!/usr/bin/env bash
# The soak: prefixgate in front of 4 sim engines for 30 minutes at steady moderate load (a
# shared-prefix and multi-turn streaming mix, ~2.5 requests/s), one engine SIGKILLed and started
# again with an empty cache every 3 minutes, the RSS and open descriptors of every process and the
# gateway's index and /metrics, /stats sizes sampled every 10 s. Exits 0 when, after the warm-up
# (the first 20 %; the gateway's first 15 minutes, while its /stats ring fills), every process's RSS
# stays within 5 % (max/min), its descriptors other than established connections do not
# rise (+5 % + 4), the sizes stop growing and
# nothing failed but the streams the kills cut; 3 when not (tools/prefixgate-bench/soak.h).
#
#   scripts/soak.sh                          # build/results/soak.{json,csv,svg}
#   scripts/soak.sh --duration 5m --restart-every 1m --json /tmp/soak.json
#
# Extra arguments go to `prefixgate-bench soak` (its --help lists them; its defaults are the
# above). The binaries are copied
# aside first, so rebuilding during the run does not change what the restarts start.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target prefixgate-bench prefixgate prefixgate-engine
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp build/release/tools/prefixgate-bench/prefixgate-bench build/release/engine/prefixgate-engine \
  build/release/gateway/prefixgate "$bin/"
"$bin/prefixgate-bench" soak \
  --engine-bin "$bin/prefixgate-engine" --gateway-bin "$bin/prefixgate" "$@"
