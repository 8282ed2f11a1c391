#!/usr/bin/env bash
# Fails when a C++ source file is not clang-formatted (.clang-format at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
((${#files[@]})) || exit 0
if ! clang-format --dry-run -Werror "${files[@]}"; then
  echo "check-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
