#!/usr/bin/env bash
# Builds the fuzz_* programs (the fuzz preset: clang, libFuzzer, ASan + UBSan) and runs each on
# its seed corpus (tests/fuzz/<program>/, replayed first: the crashes found before live there
# as regression inputs) and then fuzzes for a fixed time. New corpus entries go to a work folder,
# not into the repository. Exits non-zero at the first crash, leak, timeout or out-of-memory.
# Usage: scripts/fuzz.sh [SECONDS_EACH] [PROGRAM...]
#   scripts/fuzz.sh                 5 s each, every program (what CI runs)
#   scripts/fuzz.sh 600 fuzz_http   a longer run of one; FUZZ_WORK=DIR keeps its corpus there
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
shift || true
programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  programs=(fuzz_json fuzz_tokenizer fuzz_jinja fuzz_kv_events fuzz_config fuzz_request_prep
    fuzz_http fuzz_peer_datagram fuzz_chunked_body fuzz_upstream_answer)
fi

if ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "libFuzzer is missing: apt-get install -y clang libfuzzer-14-dev" >&2
  exit 2
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target "${programs[@]}"

work=${FUZZ_WORK:-$(mktemp -d)}
for p in "${programs[@]}"; do
  mkdir -p "$work/$p"
  echo "== $p: ${seconds}s"
  # -timeout: one input that takes longer is a hang; -rss_limit_mb: a leak or a blow-up.
  status=0
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "build/fuzz/tests/fuzz/$p" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/$p-" "$work/$p" "tests/fuzz/$p" \
    >"$work/$p.log" 2>&1 || status=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/$p.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$work/$p.log" >&2
    echo "$p failed: the input is in $work (tests/fuzz/README.md: make it a regression input)" >&2
    exit 1
  fi
done
