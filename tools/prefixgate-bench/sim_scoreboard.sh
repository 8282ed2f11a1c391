#!/usr/bin/env bash
# sim_scoreboard.sh: cache_aware against the anchors' routers (SGLang's and Dynamo's rules, as
# baseline policies) on every simulator workload, at 8, 64 and 1,000 replicas and at 0.8 and 1.0
# of the fleet's modelled capacity, one gateway; then one table of hit rate and TTFT p99 per cell,
# each marked by whether cache_aware is ahead of both, level with the better one (within 0.05
# points of hit rate, 2 % of TTFT p99), or behind.
#
# Usage: tools/prefixgate-bench/sim_scoreboard.sh [OUT_DIR]   (default build/results/scoreboard)
# Every run's JSON stays in OUT_DIR; the table goes to stdout and OUT_DIR/scoreboard.md. Each
# workload is sized to the fleet (a shared prefix's groups and a multi-turn's conversations grow
# with the replicas; at 1,000 replicas multi-turn has 8 conversations a replica, agent 4 runs and
# volatile prompts the 32,768 of the 64-replica run: fleet-sized, they would take hours). About 26
# minutes on 2 cores, 7 of them volatile prompts at 1,000 replicas.
#
# Environment: ONLY=REGEX runs only the rows whose name matches (e.g. ONLY='^volatile').
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BENCH="$ROOT/build/release/tools/prefixgate-bench/prefixgate-bench"
[[ -x $BENCH ]] || { echo "sim_scoreboard.sh: build the release preset first" >&2; exit 2; }
OUT="${1:-$ROOT/build/results/scoreboard}"
mkdir -p "$OUT"

TRACE="--workload trace --trace $ROOT/data/traces/mooncake_synthetic_trace.jsonl --length-scale 0.0625 --max-model-len 16384"
# name|replicas|workload arguments
ROWS=(
  "shared-prefix|8|--workload shared-prefix --groups 64 --prompts-per-group 16"
  "shared-prefix|64|--workload shared-prefix --groups 512 --prompts-per-group 16"
  "shared-prefix|1000|--workload shared-prefix --groups 4000 --prompts-per-group 16"
  "hot-prefix|8|--workload shared-prefix --groups 2 --prompts-per-group 512"
  "hot-prefix|64|--workload shared-prefix --groups 16 --prompts-per-group 512"
  "mooncake|8|$TRACE"
  "mooncake|64|$TRACE --trace-copies 4"
  "mooncake|1000|$TRACE --trace-copies 8"
  "multi-turn-64conv|8|--workload multi-turn"
  "multi-turn-64conv|64|--workload multi-turn"
  "multi-turn|8|--workload multi-turn --conversations 512"
  "multi-turn|64|--workload multi-turn --conversations 4096"
  "multi-turn|1000|--workload multi-turn --conversations 8000"
  "agent|8|--workload agent --agents 256 --max-model-len 32768"
  "agent|64|--workload agent --agents 2048 --max-model-len 32768"
  "agent|1000|--workload agent --agents 4000 --max-model-len 32768"
  "volatile|8|--workload volatile --requests 4096"
  "volatile|64|--workload volatile --requests 32768"
  "volatile|1000|--workload volatile --requests 32768"
)

for row in "${ROWS[@]}"; do
  IFS='|' read -r name replicas args <<<"$row"
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || continue
  json="$OUT/$name-$replicas.json"
  start=$SECONDS
  # shellcheck disable=SC2086  # the workload's arguments are words
  "$BENCH" simulate --policies cache_aware,sglang_cache_aware,dynamo_kv --load 0.8,1.0 \
    --sim-profile h100:llama3-8b --replicas "$replicas" --no-progress --json "$json" $args >"$OUT/$name-$replicas.txt" 2>&1
  echo "sim_scoreboard.sh: $name at $replicas replicas, $((SECONDS - start)) s" >&2
done

python3 - "$OUT" <<'PY' | tee "$OUT/scoreboard.md"
import glob
import json
import os
import sys

out = sys.argv[1]
HIT_TIE, TTFT_TIE = 0.0005, 0.02
order = ["shared-prefix", "hot-prefix", "mooncake", "multi-turn", "multi-turn-64conv", "agent", "volatile"]
files = sorted(glob.glob(os.path.join(out, "*.json")),
               key=lambda f: (order.index(os.path.basename(f).rsplit("-", 1)[0])
                              if os.path.basename(f).rsplit("-", 1)[0] in order else 99,
                              int(os.path.basename(f).rsplit("-", 1)[1][:-5])))
def mark(ours, best, lower_is_better, tie):
    if lower_is_better:
        if ours <= best * (1 - tie): return "ahead"
        return "level" if ours <= best * (1 + tie) else "behind"
    if ours >= best + tie: return "ahead"
    return "level" if ours >= best - tie else "behind"
def ms(s): return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"
print("| workload | replicas | load | cache_aware | sglang_cache_aware | dynamo_kv | hit rate | TTFT p99 |")
print("| --- | ---: | ---: | --- | --- | --- | --- | --- |")
tally = {}
for f in files:
    name = os.path.basename(f).rsplit("-", 1)[0]
    cells = {}
    for r in json.load(open(f))["results"]:
        cells.setdefault((r["replicas"], r["load"]), {})[r["policy"]] = r
    for (replicas, load), by in sorted(cells.items()):
        ca, sg, dy = by["cache_aware"], by["sglang_cache_aware"], by["dynamo_kv"]
        hit = mark(ca["hit_rate"], max(sg["hit_rate"], dy["hit_rate"]), False, HIT_TIE)
        tail = mark(ca["ttft_p99"], min(sg["ttft_p99"], dy["ttft_p99"]), True, TTFT_TIE)
        for measure, m in (("hit rate", hit), ("TTFT p99", tail)):
            tally.setdefault(measure, {})[m] = tally.get(measure, {}).get(m, 0) + 1
        cell = lambda r: f"{r['hit_rate'] * 100:.2f} % ({ms(r['ttft_p99'])})"
        print(f"| {name} | {replicas} | {load:g} | {cell(ca)} | {cell(sg)} | {cell(dy)} | {hit} | {tail} |")
print()
for measure, marks in tally.items():
    print(f"cache_aware's {measure} against the better of the two: " +
          ", ".join(f"{marks.get(m, 0)} {m}" for m in ("ahead", "level", "behind")) +
          f" of {sum(marks.values())} cells")
PY
