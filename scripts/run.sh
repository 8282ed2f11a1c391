#!/usr/bin/env bash
# The main job on embedded defaults. Today: build prefixlint and lint the bundled examples
# (every rule fires somewhere in them), diff two prompt versions and analyse a traffic log.
# When the engine and the gateway land, this starts the gateway in front of engine replicas.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target prefixlint
lint=build/release/tools/prefixlint/prefixlint

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@" || true; }
step "$lint" check examples/prompts/*.json examples/prompts/*.txt
step "$lint" diff examples/prompts/system-prompt-v1.json examples/prompts/system-prompt-v2.json
step "$lint" diff examples/prompts/agent-tools-v1.json examples/prompts/agent-tools-v2.json
step "$lint" log examples/logs/traffic.jsonl
