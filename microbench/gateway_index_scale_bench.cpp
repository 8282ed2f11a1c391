// The prefix index at fleet scale: 1,000 replicas and 10 M blocks (10,240 K entries of 16-token
// blocks: 164 M tokens, about what 360 H100s of Llama 3 8B cache), and what it costs.
//
//   BM_IndexMemory/holders:H        bytes per (block, replica) entry: the heap the index holds
//                                   after building, counted at operator new and delete, and
//                                   its block table's mapped buckets
//   BM_IndexLongestMatch            lookups/s of a 2,048-block prompt matched to the end
//   BM_IndexLongestMatchScattered/lengths:L
//                                   the same prompt held by L replicas, to L different lengths
//   BM_IndexLongestMatchShort/blocks:N
//                                   a short prompt of N blocks (a 3 KB chat is about 45) held by
//                                   one replica, a different prompt each time, so its entries
//                                   come from memory as a busy gateway's would
//   BM_IndexApplyEvents             events/s: a stored and a removed block per iteration, as a
//                                   replica's cache turns over, on the full index (this and the
//                                   next on the fleet with its replicas' logs staggered, so
//                                   that their sweeps are timed too: staggered_fleet)
//   BM_IndexApplyEventRuns/batched:B  events/s in runs: a replica stores 16 new blocks and
//                                   evicts 16 old ones, by a call a change (B 0) or one
//                                   apply_changes a run (B 1)
//   BM_IndexLogSweep/held:N        a replica holding N blocks more turns its cache over (a block
//                                   removed, a new one stored) until its log of confirmed blocks
//                                   is swept: events/s, and the longest single event (pause_ms),
//                                   which is the sweep's
//   BM_RouteDecision32k/policy:P    one routing decision for a 32k-token prompt (2,048 blocks)
//   BM_RouteDecision32kTimed/P      the same on replicas that announce their speed and places
//   BM_RouteDecision32kTemplateOnly/P  the same for a prompt of which every replica holds only
//                                   the first block: the load decides
//
// The index is built once and shared: 5,000 prompts of 2,048 chained blocks, each held by
// `holders` replicas (1: a cache-aware fleet with one copy of everything; 4: hot prefixes
// replicated), spread over the replicas in turn, so each replica holds 10-40 K blocks.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"
#include "synthetic_hashes.h"

// The heap the program holds, counted while `heap_count::on`: usable bytes of each block
// operator new returns, less those operator delete takes back. The gateway links mimalloc, whose
// memory glibc's mallinfo2 does not see, so the allocator's own statistics would read 0; this
// counts the same with either allocator. (operator new[] and sized delete reach these.)
namespace heap_count {
bool on = false;
std::int64_t bytes = 0;
}  // namespace heap_count

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  if (heap_count::on) heap_count::bytes += static_cast<std::int64_t>(malloc_usable_size(p));
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr && heap_count::on) {
    heap_count::bytes -= static_cast<std::int64_t>(malloc_usable_size(p));
  }
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  operator delete(p);
}
// The aligned forms: the index's block table asks for them while it is under 2 MiB.
void* operator new(std::size_t n, std::align_val_t align) {
  const auto a = static_cast<std::size_t>(align);
  void* p = std::aligned_alloc(a, (n + a - 1) / a * a);
  if (p == nullptr) throw std::bad_alloc();
  if (heap_count::on) heap_count::bytes += static_cast<std::int64_t>(malloc_usable_size(p));
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept {
  operator delete(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  operator delete(p);
}

namespace {

using namespace prefixgate::gateway;

constexpr std::size_t kReplicas = 1000;
constexpr std::size_t kPromptBlocks = 2048;
constexpr std::size_t kPrompts = 5000;  // 10,240,000 blocks

using synthetic_hashes::chain;
using synthetic_hashes::mix;

struct Fleet {
  std::unique_ptr<PrefixIndex> index;
  std::size_t entries = 0;  // (block, replica) pairs
  std::size_t bytes = 0;    // heap the index holds, and its mapped table
};

// Built on first use, then kept: building 10 M blocks takes seconds.
Fleet& fleet(std::size_t holders) {
  static std::map<std::size_t, Fleet> fleets;
  Fleet& f = fleets[holders];
  if (f.index) return f;
  heap_count::bytes = 0;
  heap_count::on = true;
  f.index = std::make_unique<PrefixIndex>();
  for (std::size_t r = 0; r < kReplicas; ++r) f.index->add_replica({});
  for (std::size_t p = 0; p < kPrompts; ++p) {
    const std::vector<std::uint64_t> blocks = chain(p, kPromptBlocks);
    for (std::size_t h = 0; h < holders; ++h) {
      const auto r = static_cast<ReplicaId>((p * holders + h * 7) % kReplicas);
      for (std::uint64_t b : blocks) f.index->apply_stored(r, b);
      f.entries += blocks.size();
    }
  }
  heap_count::on = false;
  // The block table's buckets are mapped apart from the heap once they reach 2 MiB.
  f.bytes = static_cast<std::size_t>(heap_count::bytes) + f.index->mapped_bytes();
  return f;
}

void BM_IndexMemory(benchmark::State& state) {
  const auto holders = static_cast<std::size_t>(state.range(0));
  Fleet& f = fleet(holders);
  for (auto _ : state) benchmark::DoNotOptimize(f.index->size());
  state.counters["blocks"] = static_cast<double>(f.index->size());
  state.counters["entries"] = static_cast<double>(f.entries);
  state.counters["MiB"] = static_cast<double>(f.bytes) / (1 << 20);
  state.counters["bytes_per_entry"] = static_cast<double>(f.bytes) / static_cast<double>(f.entries);
  state.counters["bytes_per_block"] =
      static_cast<double>(f.bytes) / static_cast<double>(f.index->size());
}
BENCHMARK(BM_IndexMemory)->ArgName("holders")->Arg(1)->Arg(4)->Iterations(1);

void BM_IndexLongestMatch(benchmark::State& state) {
  Fleet& f = fleet(1);
  const std::vector<std::uint64_t> prompt = chain(1234, kPromptBlocks);
  std::vector<std::size_t> out(kReplicas);
  for (auto _ : state) {
    f.index->longest_match(prompt, Clock::time_point{}, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["blocks_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kPromptBlocks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_IndexLongestMatch)->Unit(benchmark::kMicrosecond);

// The match's harder case: a 2,048-block prompt of which `lengths` replicas hold leading runs of
// as many different lengths, spread evenly (a galloping search pays for each distinct length).
// The runs are stored for the benchmark and removed after it, so the fleet is left as it was.
void BM_IndexLongestMatchScattered(benchmark::State& state) {
  Fleet& f = fleet(1);
  const auto lengths = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> prompt = chain(987654321, kPromptBlocks);
  auto run = [&](std::size_t r) { return kPromptBlocks * (r + 1) / (lengths + 1); };
  for (std::size_t r = 0; r < lengths; ++r) {
    for (std::size_t i = 0; i < run(r); ++i)
      f.index->apply_stored(static_cast<ReplicaId>(r), prompt[i]);
  }
  std::vector<std::size_t> out(kReplicas);
  for (auto _ : state) {
    f.index->longest_match(prompt, Clock::time_point{}, out);
    benchmark::DoNotOptimize(out.data());
  }
  for (std::size_t r = 0; r < lengths; ++r) {
    for (std::size_t i = 0; i < run(r); ++i)
      f.index->apply_removed(static_cast<ReplicaId>(r), prompt[i]);
  }
}
BENCHMARK(BM_IndexLongestMatchScattered)
    ->ArgName("lengths")
    ->Arg(2)
    ->Arg(8)
    ->Arg(32)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond);

void BM_IndexLongestMatchShort(benchmark::State& state) {
  Fleet& f = fleet(1);
  const auto blocks = static_cast<std::size_t>(state.range(0));
  // The leading blocks of every stored prompt: chained hashes, so a prompt's first N blocks are
  // a prompt of N blocks that its one replica holds whole.
  std::vector<std::vector<std::uint64_t>> prompts;
  prompts.reserve(kPrompts);
  for (std::size_t p = 0; p < kPrompts; ++p) prompts.push_back(chain(p, blocks));
  std::vector<std::size_t> out(kReplicas);
  std::size_t next = 0;
  for (auto _ : state) {
    f.index->longest_match(prompts[next], Clock::time_point{}, out);
    benchmark::DoNotOptimize(out.data());
    next = next + 1 == kPrompts ? 0 : next + 1;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_IndexLongestMatchShort)
    ->ArgName("blocks")
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Arg(48)
    ->Arg(63)
    ->Unit(benchmark::kMicrosecond);

// A replica's log of confirmed blocks is swept once the removals noted in it reach half of what
// the replica holds and 1,024 more, and a gateway that has run a while pays for its sweeps all the
// time. Here every replica holds the same and starts with the same log, so their sweeps would all
// come due at once, long after any run of these benchmarks. Before the event benchmarks, each
// replica r therefore stores and removes r / 1,000 of that many blocks (6 M events, about 1 s),
// so that the replicas' sweeps come due spread evenly, as in a fleet that has run a while, and
// their share is in what is timed.
Fleet& staggered_fleet() {
  Fleet& f = fleet(1);
  static bool staggered = false;
  if (staggered) return f;
  constexpr std::size_t kPeriod = kPromptBlocks * kPrompts / kReplicas / 2 + 1024;
  std::vector<KeyChange> churn;
  for (std::size_t r = 0; r < kReplicas; ++r) {
    churn.clear();
    for (std::size_t i = 0; i < kPeriod * r / kReplicas; ++i) {
      churn.push_back({mix(0xa9ed0000000 ^ (r << 20) ^ i), KeyState::kPrimary});
    }
    const std::size_t n = churn.size();
    for (std::size_t i = 0; i < n; ++i) churn.push_back({churn[i].key, KeyState::kAbsent});
    f.index->apply_changes(static_cast<ReplicaId>(r), churn);
  }
  staggered = true;
  return f;
}

void BM_IndexApplyEvents(benchmark::State& state) {
  Fleet& f = staggered_fleet();
  // A replica's cache turning over: a new block stored, an old one removed, on the full index.
  std::uint64_t next = 0;
  for (auto _ : state) {
    const std::uint64_t fresh = mix(0xabcdef ^ next);
    const auto r = static_cast<ReplicaId>(next % kReplicas);
    f.index->apply_stored(r, fresh);
    f.index->apply_removed(r, fresh);
    ++next;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(2 * state.iterations()));
}
BENCHMARK(BM_IndexApplyEvents);

// A replica's events as they come, a run at a time: it stores a prompt's 16 new blocks and evicts
// the 16 it stored 1,000 runs ago (the fleet's other replicas' runs came between, so those
// entries are back in memory, not in cache). `batched`: 0 applies each change by its own call,
// 1 the run by apply_changes, which fetches entries ahead. The shared index keeps one such run
// per replica past this benchmark (16,000 blocks more than its 10.24 M). On the fleet with its
// replicas' logs staggered, as BM_IndexApplyEvents.
void BM_IndexApplyEventRuns(benchmark::State& state) {
  constexpr std::size_t kRun = 16;
  const bool batched = state.range(0) != 0;
  Fleet& f = staggered_fleet();
  static std::uint64_t next = 0;  // across the two variants: each run's blocks are new
  std::vector<KeyChange> run(2 * kRun);
  auto blocks_of = [](std::uint64_t k, std::size_t i) { return mix(0x5eed0000 ^ (k * kRun + i)); };
  auto make_run = [&] {
    for (std::size_t i = 0; i < kRun; ++i) {
      run[i] = {blocks_of(next, i), KeyState::kPrimary};
      // The run this replica stored 1,000 runs ago (none yet for the first 1,000).
      run[kRun + i] = {next >= kReplicas ? blocks_of(next - kReplicas, i) : blocks_of(next, i),
                       KeyState::kAbsent};
    }
    if (next < kReplicas) std::swap_ranges(run.begin(), run.begin() + kRun, run.begin() + kRun);
    return static_cast<ReplicaId>(next++ % kReplicas);
  };
  for (auto _ : state) {
    const ReplicaId r = make_run();
    if (batched) {
      f.index->apply_changes(r, run);
    } else {
      for (const KeyChange& c : run) {
        if (c.state == KeyState::kAbsent) {
          f.index->apply_removed(r, c.key);
        } else {
          f.index->apply_stored(r, c.key);
        }
      }
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(2 * kRun * state.iterations()));
}
BENCHMARK(BM_IndexApplyEventRuns)->ArgName("batched")->Arg(0)->Arg(1);

// A replica's cache turning over until its log of confirmed blocks is swept once: replica 0 holds
// `held` blocks more than the fleet gave it, and each iteration removes its oldest extra block
// and stores a new one, so the log grows by one an iteration and the sweep comes after about
// held + 1,024 (the iteration count). The longest iteration is the sweep's pause, what every
// other routing decision waits behind; the extra blocks are removed again after.
void BM_IndexLogSweep(benchmark::State& state) {
  Fleet& f = fleet(1);
  const auto held = static_cast<std::size_t>(state.range(0));
  std::deque<std::uint64_t> extra;
  std::uint64_t next = 0;
  auto fresh = [&] { return mix(0x51ee9000000 ^ next++); };
  for (std::size_t i = 0; i < held; ++i) {
    extra.push_back(fresh());
    f.index->apply_stored(0, extra.back());
  }
  double longest = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    f.index->apply_removed(0, extra.front());
    extra.pop_front();
    extra.push_back(fresh());
    f.index->apply_stored(0, extra.back());
    longest = std::max(
        longest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  for (std::uint64_t hash : extra) f.index->apply_removed(0, hash);  // the loop's timing is over
  state.SetItemsProcessed(static_cast<std::int64_t>(2 * state.iterations()));
  state.counters["pause_ms"] = longest * 1e3;
}
BENCHMARK(BM_IndexLogSweep)
    ->ArgName("held")
    ->Arg(100000)
    ->Iterations(100000 + 20000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IndexLogSweep)
    ->ArgName("held")
    ->Arg(1000000)
    ->Iterations(1000000 + 20000)
    ->Unit(benchmark::kMicrosecond);

// The fleet's views: queues and batches that differ by replica. `timed`: every replica announces
// its speed and its batch places, as prefixgate-engine does, so cache_aware's cost is in seconds
// and its queued prefill drains (prefill_drain).
std::vector<ReplicaView> fleet_views(bool timed) {
  std::vector<ReplicaView> views(kReplicas);
  for (std::size_t r = 0; r < kReplicas; ++r) {
    views[r].id = static_cast<ReplicaId>(r);
    views[r].tokens_queued_for_prefill = 1000 + 37 * (r % 50);
    views[r].running = 8 + r % 5;
    views[r].inflight_requests = r % 7;
    if (timed) {
      views[r].prefill_seconds_per_token = 3e-5;
      views[r].decode_seconds_per_sequence = 1e-4;
      views[r].batch_slots = 64;
      views[r].admission_interval_seconds = 0.05;
      // As a report just applied leaves it: the queue it showed, none of it drained yet.
      views[r].report_beyond_own_tokens = views[r].tokens_queued_for_prefill;
    }
  }
  return views;
}

RouteRequest request_32k(const std::vector<std::uint64_t>& prompt) {
  RouteRequest request;
  request.block_hashes = prompt;
  request.prompt_tokens = kPromptBlocks * 16;
  request.block_size = 16;
  return request;
}

// A prompt one replica holds whole. Timed, both prefill_drain variants see the same queues and
// differ only in reading them.
void route_decision_32k(benchmark::State& state, const char* name, bool timed) {
  Fleet& f = fleet(1);
  const std::vector<ReplicaView> views = fleet_views(timed);
  auto policy = std::move(*make_policy(name));
  const std::vector<std::uint64_t> prompt = chain(1234, kPromptBlocks);  // held by one replica
  const RouteRequest request = request_32k(prompt);
  for (auto _ : state) {
    RouteDecision d = policy->route(request, views, *f.index, Clock::time_point{});
    benchmark::DoNotOptimize(d);
  }
}
void BM_RouteDecision32k(benchmark::State& state, const char* name) {
  route_decision_32k(state, name, /*timed=*/false);
}
void BM_RouteDecision32kTimed(benchmark::State& state, const char* name) {
  route_decision_32k(state, name, /*timed=*/true);
}
BENCHMARK_CAPTURE(BM_RouteDecision32k, cache_aware, "cache_aware")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32k, dynamo_kv, "dynamo_kv")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32k, sglang_cache_aware, "sglang_cache_aware")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32k, round_robin, "round_robin")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32kTimed, cache_aware, "cache_aware")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32kTimed, cache_aware_no_drain, "cache_aware:prefill_drain=false")
    ->Unit(benchmark::kMicrosecond);

// A prompt of which every replica holds only the first block (a chat template's start, then a
// timestamp): the cache saves nothing worth a choice and the load decides, where cache_aware
// takes near ties in turn (near_tie_prefills), one more pass over the replicas. Each decision is
// recorded as sent, so the replicas' last sends differ as in a running gateway.
void BM_RouteDecision32kTemplateOnly(benchmark::State& state, const char* name) {
  Fleet& f = fleet(1);
  const std::vector<ReplicaView> views = fleet_views(/*timed=*/true);
  const std::vector<std::uint64_t> prompt = chain(4242, kPromptBlocks);
  for (std::size_t r = 0; r < kReplicas; ++r) {
    f.index->apply_stored(static_cast<ReplicaId>(r), prompt[0]);
  }
  auto policy = std::move(*make_policy(name));
  const RouteRequest request = request_32k(prompt);
  Clock::time_point now{};
  for (auto _ : state) {
    now += std::chrono::milliseconds(1);
    RouteDecision d = policy->route(request, views, *f.index, now);
    policy->on_routed(request, d, now);
    benchmark::DoNotOptimize(d);
  }
  for (std::size_t r = 0; r < kReplicas; ++r) {
    f.index->apply_removed(static_cast<ReplicaId>(r), prompt[0]);
  }
}
BENCHMARK_CAPTURE(BM_RouteDecision32kTemplateOnly, cache_aware, "cache_aware")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RouteDecision32kTemplateOnly, cache_aware_no_near_ties,
                  "cache_aware:near_tie_prefills=0")
    ->Unit(benchmark::kMicrosecond);

}  // namespace
