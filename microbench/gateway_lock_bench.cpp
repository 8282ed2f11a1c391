// The gateway's one shared lock: every server thread routes through ReplicaSet, whose mutex
// guards the prefix index and the replicas' load. This measures what one request holds it for
// over its life (route with its predictions, the first token settling them, the engine's event
// confirming the new blocks, the end, and the eviction of an older turn's blocks, as a full cache
// evicts as much as it stores), on a 3 KB prompt's 192 blocks over 8 replicas; and the
// same from several threads at once, which shows the lock's contention where the host has the
// cores. A request costs the gateway ~45 us of CPU in all (docs/results); the time under the
// lock bounds how many threads can route before it, not the CPU, is the limit.
// BM_ReplicaSetRoute: one decision alone, on fleets of 8 to 1,000 replicas;
// BM_ReplicaSetRouteBesideStatus: decisions while another thread reads the replicas' status.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "config.h"
#include "healthy_replica_set.h"
#include "prefixgate/gateway/engine_block_keys.h"
#include "prefixgate/gateway/routing.h"
#include "server/replica_set.h"
#include "synthetic_hashes.h"

namespace {

using namespace prefixgate::gateway;
using server::ReplicaSet;

constexpr std::size_t kReplicas = 8;
constexpr std::size_t kBlocks = 192;        // a 3 KB chat with the byte tokenizer, 16 per block
constexpr std::size_t kSharedBlocks = 180;  // the system prompt, tools and earlier turns
constexpr std::size_t kPrefixes = 64;       // conversations in flight across the fleet
constexpr std::size_t kTurnsHeld = 4096;    // each thread's newest turns the caches keep

ReplicaSet& shared_set() {
  static ReplicaSet& set = []() -> ReplicaSet& {
    ReplicaSet& s = server::healthy_replica_set(kReplicas);
    // Each conversation's shared blocks already cached on one replica, as its events told.
    for (std::size_t p = 0; p < kPrefixes; ++p) {
      std::vector<KeyChange> held;
      for (std::uint64_t h : synthetic_hashes::chain(p, kSharedBlocks)) {
        held.push_back({h, KeyState::kPrimary});
      }
      s.apply_key_changes(static_cast<ReplicaId>(p % kReplicas), held);
    }
    return s;
  }();
  return set;
}

void BM_ReplicaSetRequestCycle(benchmark::State& state) {
  ReplicaSet& set = shared_set();
  std::vector<std::vector<std::uint64_t>> prompts;
  for (std::size_t p = 0; p < kPrefixes; ++p) {
    prompts.push_back(synthetic_hashes::chain(p, kSharedBlocks));
  }
  std::uint64_t turn = static_cast<std::uint64_t>(state.thread_index()) << 40;
  std::vector<std::uint64_t> hashes;
  std::vector<KeyChange> stored;
  std::deque<std::pair<ReplicaId, std::vector<std::uint64_t>>> held;
  for (auto _ : state) {
    // A conversation's next turn: its shared blocks, then new ones.
    const std::vector<std::uint64_t>& prefix = prompts[turn % kPrefixes];
    hashes.assign(prefix.begin(), prefix.end());
    std::uint64_t h = prefix.back();
    for (std::size_t i = kSharedBlocks; i < kBlocks; ++i) {
      hashes.push_back(h = synthetic_hashes::mix(h ^ (turn + i)));
    }
    ++turn;
    RouteRequest request;
    request.block_hashes = hashes;
    request.prompt_tokens = kBlocks * 16;
    const RouteDecision d = set.route(request, {}, Clock::now());
    set.prefilled(d, hashes, request.prompt_tokens);
    stored.clear();
    for (std::size_t i = kSharedBlocks; i < kBlocks; ++i) {
      stored.push_back({hashes[i], KeyState::kPrimary});
    }
    set.apply_key_changes(d.replica, stored);
    set.finish(d, hashes, true, 0);
    // A full cache evicts as much as it stores: the blocks of the turn kTurnsHeld ago go.
    held.push_back(
        {d.replica, std::vector<std::uint64_t>(hashes.begin() + kSharedBlocks, hashes.end())});
    if (held.size() > kTurnsHeld) {
      stored.clear();
      for (std::uint64_t old : held.front().second) stored.push_back({old, KeyState::kAbsent});
      set.apply_key_changes(held.front().first, stored);
      held.pop_front();
    }
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReplicaSetRequestCycle)->Threads(1)->Threads(2)->UseRealTime();

// One routing decision as a server thread makes it under the lock (a dry run: nothing predicted
// or counted), on fleets of 8 to 1,000 replicas: a 3 KB prompt's 192 blocks, or a 32k-token
// prompt's 2,048, one replica holding them. Beside gateway_index_scale_bench's
// BM_RouteDecision32k (the policy alone), what the gateway's own bookkeeping adds to a decision.
void BM_ReplicaSetRoute(benchmark::State& state) {
  const auto replicas = static_cast<std::size_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  static std::map<std::pair<std::size_t, std::size_t>, ReplicaSet*> sets;
  ReplicaSet*& set = sets[{replicas, blocks}];
  const std::vector<std::uint64_t> prompt = synthetic_hashes::chain(7, blocks);
  if (set == nullptr) {
    set = &server::healthy_replica_set(replicas);
    std::vector<KeyChange> held;
    for (std::uint64_t h : prompt) held.push_back({h, KeyState::kPrimary});
    set->apply_key_changes(0, held);
  }
  RouteRequest request;
  request.block_hashes = prompt;
  request.prompt_tokens = blocks * 16;
  for (auto _ : state) {
    const RouteDecision d = set->route(request, {}, Clock::now(), /*dry_run=*/true);
    benchmark::DoNotOptimize(d);
  }
}
// Routing while another thread reads every replica's status, as a /metrics scrape does (ten
// times a scrape, once per per-replica gauge) and the dashboard's sampler once a second, here
// without pause: thread 0 makes dry-run decisions for the 3 KB prompt on 1,000 replicas and
// counts them (decisions_per_s), thread 1 reads the status. What the reader holds the routing
// lock for is what the decisions wait.
void BM_ReplicaSetRouteBesideStatus(benchmark::State& state) {
  constexpr std::size_t kFleet = 1000;
  static ReplicaSet& set = []() -> ReplicaSet& {
    ReplicaSet& s = server::healthy_replica_set(kFleet);
    std::vector<KeyChange> held;
    for (std::uint64_t h : synthetic_hashes::chain(11, kBlocks))
      held.push_back({h, KeyState::kPrimary});
    s.apply_key_changes(0, held);
    return s;
  }();
  const std::vector<std::uint64_t> prompt = synthetic_hashes::chain(11, kBlocks);
  RouteRequest request;
  request.block_hashes = prompt;
  request.prompt_tokens = kBlocks * 16;
  std::size_t decisions = 0;
  for (auto _ : state) {
    if (state.thread_index() == 0) {
      const RouteDecision d = set.route(request, {}, Clock::now(), /*dry_run=*/true);
      benchmark::DoNotOptimize(d);
      ++decisions;
    } else {
      benchmark::DoNotOptimize(set.status());
    }
  }
  if (state.thread_index() == 0) {
    state.counters["decisions_per_s"] =
        benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  }
}
BENCHMARK(BM_ReplicaSetRouteBesideStatus)->Threads(2)->UseRealTime();

BENCHMARK(BM_ReplicaSetRoute)
    ->ArgNames({"replicas", "blocks"})
    ->Args({8, 192})
    ->Args({64, 192})
    ->Args({1000, 192})
    ->Args({1000, 2048});

}  // namespace
