#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, the formatting check, a release build with
# all tests, every test again under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# concurrent parts (the engine thread, the engine and gateway servers) under ThreadSanitizer.
# Usage: scripts/test.sh            (from anywhere; builds under build/)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-js-deps.sh

jobs=$(nproc)
# Each phase's wall time, so CI's total can be kept in view (SECONDS counts from the start).
phase() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

phase "format check"
scripts/check-format.sh

# The GPU host's self-contained build (scripts/gpu-bundle.sh OUTDIR builds, checks and packs it,
# minutes): here only that its preset configures and links the engine statically (seconds).
phase "static preset: configure and check the engine's link line"
scripts/gpu-bundle.sh --check-config

phase "release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

phase "asan+ubsan build and tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

phase "tsan build and the concurrent tests (engine loop, engine and gateway servers)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target engine_loop_tests engine_server_tests \
  prefixgate prefixgate-engine
export TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0"
# The engine's server tests run servers in-process as well as as binaries: built with TSan.
ctest --test-dir build/tsan -j "$jobs" --output-on-failure --no-tests=error -L server
ctest --test-dir build/tsan -j "$jobs" --output-on-failure --no-tests=error \
  -R '^(EngineLoopTest|KvEventLogTest)\.'
# The gateway's tests talk to it only as a process: the release-built tests drive the
# TSan-built gateway and engines (a race makes a server exit, and its test fail).
PREFIXGATE_GATEWAY_BIN="$PWD/build/tsan/gateway/prefixgate" \
  PREFIXGATE_ENGINE_BIN="$PWD/build/tsan/engine/prefixgate-engine" \
  ctest --test-dir build/release -j "$jobs" --output-on-failure --no-tests=error \
  -R '^(Gateway|Stats|Observability|OpenAi)'
phase "done"
