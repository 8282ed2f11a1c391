#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, the formatting check, a release build with
# all tests, the tests again under AddressSanitizer + UndefinedBehaviorSanitizer (all but those
# labelled asan-skip, which that build leaves out), and the tests labelled concurrent (the engine
# thread, the engine and gateway servers) under ThreadSanitizer. Labels: CONTRIBUTING.md.
# Then the fuzz_* programs (clang, libFuzzer) a few seconds each on their seed corpora, which hold
# every crash found so far (tests/fuzz/README.md).
# Usage: scripts/test.sh            (from anywhere; builds under build/)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-js-deps.sh

jobs=$(nproc)
# The tests' temporary files (configs, corpora, the logs of the servers they start) go to a
# folder of this run's own: removed when every phase passed, kept for a look when one failed.
TMPDIR="$(mktemp -d /tmp/prefixgate-test.XXXXXX)"
export TMPDIR TEST_TMPDIR="$TMPDIR"  # TEST_TMPDIR: GoogleTest's TempDir()
finish() {
  local status=$?
  if ((status == 0)); then
    rm -rf "$TMPDIR"
  else
    echo "scripts/test.sh: failed; the tests' temporary files are in $TMPDIR" >&2
  fi
}
trap finish EXIT
# Each phase's wall time, so CI's total can be kept in view (SECONDS counts from the start).
phase() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

phase "format check"
scripts/check-format.sh

# The GPU host's self-contained build (scripts/gpu-bundle.sh OUTDIR builds, checks and packs it,
# minutes): here only that its preset configures and links the engine statically (seconds).
phase "static preset: configure and check the engine's link line"
scripts/gpu-bundle.sh --check-config

# The profile-guided build (scripts/build-pgo.sh: two builds and a training run, minutes): here
# only that its two presets configure (seconds).
phase "pgo presets: configure"
scripts/build-pgo.sh --check-config

phase "release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

phase "asan+ubsan build and tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

phase "tsan build and the tests labelled concurrent"
cmake --preset tsan >/dev/null
# concurrent_tests: the concurrent suites that run in-process, and the servers every concurrent
# suite starts (tests/CMakeLists.txt).
cmake --build --preset tsan -j "$jobs" --target concurrent_tests
# libzmq is not instrumented: scripts/tsan.supp says why its interceptors are ignored.
export TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0 suppressions=$PWD/scripts/tsan.supp"
# Suites with threads in the test process (the engine loop, the engine's server in-process and
# as a binary): built with TSan.
ctest --test-dir build/tsan -j "$jobs" --output-on-failure --no-tests=error \
  -L concurrent -LE process-only
# Suites that reach the servers only as processes: the release-built tests drive the TSan-built
# gateway and engines (a race makes a server exit, and its test fail).
PREFIXGATE_GATEWAY_BIN="$PWD/build/tsan/gateway/prefixgate" \
  PREFIXGATE_ENGINE_BIN="$PWD/build/tsan/engine/prefixgate-engine" \
  ctest --test-dir build/release -j "$jobs" --output-on-failure --no-tests=error \
  -L concurrent -L process-only
phase "fuzz build and 3 s of each fuzz_* program"
scripts/fuzz.sh 3
phase "done"
