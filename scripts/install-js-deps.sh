#!/usr/bin/env bash
# Installs the npm packages the tests use as oracles (reference tokenizers), from the lockfile.
# Idempotent: does nothing when node_modules already matches the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
[[ -f package-lock.json ]] || exit 0
stamp=node_modules/.prefixgate-lock
if [[ -f $stamp ]] && cmp -s package-lock.json "$stamp"; then
  exit 0
fi
echo "install-js-deps: npm ci in tests/js"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
cp package-lock.json "$stamp"
