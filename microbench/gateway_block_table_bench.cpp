// The prefix index's table alone (gateway/src/block_table.h) at fleet scale: 10.24 M blocks, as
// gateway_index_scale_bench's index holds, their 16-byte entries five to a 128-byte bucket (the
// table between half and three quarters full, about 430 MB on huge pages). Each operation comes
// in batches of 16 whose buckets are fetched first, as PrefixIndex::apply_changes fetches a run's.
// What an index event costs is these operations and the bookkeeping around them, so these are
// its floor on the host at hand: a stored block is an insert, a removed one an erase, and a
// replica's log of confirmed blocks is swept with about two finds of a held block per block
// stored (confirmed_log.h).
//
//   BM_BlockTableFind/held:1     a held block found (a sweep's step, a match of a cached prefix)
//   BM_BlockTableFind/held:0     a block no one holds looked for (a prompt's new blocks)
//   BM_BlockTableChurn           a new block inserted and an old one erased, as a full cache
//                                stores and evicts: items are the two operations, so the time
//                                is their mean
//   BM_BlockTableFill            an empty table filled to 10.24 M blocks, as an index warms up:
//                                the mean insert, and the longest (max_insert_us), which is
//                                the pause a growth puts on everything under the routing lock
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "block_table.h"
#include "synthetic_hashes.h"

namespace prefixgate::gateway {
namespace {

constexpr std::size_t kHeld = 10'240'000;
constexpr std::size_t kBatch = 16;

struct Value {
  std::array<std::uint32_t, 4> words{};
};
static_assert(sizeof(Value) == 16);

// Block i's key. The table holds blocks [oldest, oldest + kHeld): [0, kHeld) at first, and
// BM_BlockTableChurn moves the window on.
std::uint64_t held_key(std::uint64_t i) {
  return synthetic_hashes::mix(0x7ab1e000000000 ^ i);
}
std::uint64_t oldest = 0;

BlockTable<Value>& table() {
  static BlockTable<Value>& t = []() -> BlockTable<Value>& {
    auto* made = new BlockTable<Value>();  // kept for the process: freed only at exit
    for (std::uint64_t i = 0; i < kHeld; ++i) made->try_emplace(held_key(i)).words[0] = 1;
    return *made;
  }();
  return t;
}

void BM_BlockTableFind(benchmark::State& state) {
  BlockTable<Value>& t = table();
  const bool held = state.range(0) != 0;
  // Keys far apart in the table, so that each batch's slots come from memory.
  std::uint64_t next = 0;
  std::array<std::uint64_t, kBatch> keys{};
  std::uint64_t found = 0;
  for (auto _ : state) {
    for (std::uint64_t& k : keys) {
      // A held block's, or a key no block has.
      k = held ? held_key(oldest + synthetic_hashes::mix(next++) % kHeld)
               : synthetic_hashes::mix(~next++);
    }
    for (const std::uint64_t k : keys) t.prefetch(k);
    for (const std::uint64_t k : keys) found += t.find(k) != nullptr ? 1 : 0;
  }
  if (found != (held ? state.iterations() * kBatch : 0)) state.SkipWithError("wrong finds");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
}
BENCHMARK(BM_BlockTableFind)->ArgName("held")->Arg(1)->Arg(0);

// The table's churn as a full cache's: each batch inserts 16 new blocks and erases the 16
// oldest, which were inserted millions of operations before and come from memory. The table
// keeps its size (and load); the ids go on across runs of the benchmark.
void BM_BlockTableChurn(benchmark::State& state) {
  BlockTable<Value>& t = table();
  std::array<std::uint64_t, kBatch> fresh{};
  std::array<std::uint64_t, kBatch> old{};
  for (auto _ : state) {
    for (std::size_t i = 0; i < kBatch; ++i) {
      fresh[i] = held_key(oldest + kHeld + i);
      old[i] = held_key(oldest + i);
    }
    oldest += kBatch;
    for (const std::uint64_t k : fresh) t.prefetch(k);
    for (const std::uint64_t k : fresh) t.try_emplace(k).words[0] = 1;
    for (const std::uint64_t k : old) t.prefetch(k);
    for (const std::uint64_t k : old) t.erase(k);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 2 * kBatch));
}
BENCHMARK(BM_BlockTableChurn);

void BM_BlockTableFill(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  constexpr std::uint64_t kRun = 32;  // a run of cache events, applied under one lock hold
  double longest_us = 0;
  double longest_run_us = 0;
  std::int64_t over_1ms = 0;
  for (auto _ : state) {
    BlockTable<Value> t;
    double run_us = 0;
    for (std::uint64_t i = 0; i < kHeld; ++i) {
      const auto start = Clock::now();
      t.try_emplace(held_key(i)).words[0] = 1;
      const std::chrono::duration<double, std::micro> took = Clock::now() - start;
      longest_us = std::max(longest_us, took.count());
      if (took.count() > 1000) ++over_1ms;
      run_us += took.count();
      if (i % kRun == kRun - 1) {
        longest_run_us = std::max(longest_run_us, run_us);
        run_us = 0;
      }
    }
    benchmark::DoNotOptimize(t.size());
  }
  state.counters["max_insert_us"] = longest_us;
  // What one lock hold applying a run of events would wait at most.
  state.counters["max_run32_us"] = longest_run_us;
  // A preempted thread's insert can take a scheduler's time slice on a busy host; a growth
  // copied at once takes one such insert per growth, each longer than the last.
  state.counters["inserts_over_1ms"] = static_cast<double>(over_1ms);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kHeld));
}
BENCHMARK(BM_BlockTableFill)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixgate::gateway
