#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, a release build with all tests, the unit
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer, and the formatting check.
# Usage: scripts/test.sh            (from anywhere; builds under build/)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/install-js-deps.sh

jobs=$(nproc)

echo "== format check"
scripts/check-format.sh

echo "== release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

echo "== asan+ubsan build and tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"
