// Routing decision time for cache_aware (longest_match over the index + cost per replica) for
// 1k, 32k and 128k-token prompts over 8 and 64 replicas.
//
// The index is populated as a busy fleet's would be: every replica holds confirmed blocks of 64
// shared prefixes of the prompt's length (each prefix on 2 replicas) and one 32-block unique tail
// per prefix copy, plus live predictions; the routed prompt shares its whole prefix with the
// replicas holding it, so the walk covers every block (the worst case: no early stop).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"
#include "synthetic_hashes.h"

namespace {

using namespace prefixgate::gateway;

using synthetic_hashes::chain;
using synthetic_hashes::mix;

void BM_CacheAwareRoute(benchmark::State& state) {
  const auto prompt_tokens = static_cast<std::size_t>(state.range(0));
  const auto replicas = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t kBlockSize = 16;
  constexpr std::size_t kPrefixes = 64;
  const std::size_t blocks = prompt_tokens / kBlockSize;

  PrefixIndex index;
  for (std::size_t r = 0; r < replicas; ++r) index.add_replica({});
  std::vector<std::vector<std::uint64_t>> prefixes;
  for (std::size_t p = 0; p < kPrefixes; ++p) {
    prefixes.push_back(chain(p, blocks));
    for (std::size_t copy = 0; copy < 2; ++copy) {
      const auto r = static_cast<ReplicaId>((p * 2 + copy * 3) % replicas);
      for (std::uint64_t h : prefixes.back()) index.apply_stored(r, h);
      for (std::uint64_t h : chain(1000 + p * 2 + copy, 32)) index.apply_stored(r, h);
    }
    index.predict(static_cast<ReplicaId>((p + 1) % replicas), prefixes.back(), Clock::time_point{});
  }
  std::vector<ReplicaView> views(replicas);
  for (std::size_t r = 0; r < replicas; ++r) {
    views[r].id = static_cast<ReplicaId>(r);
    views[r].tokens_queued_for_prefill = 1000 + 37 * r;
    views[r].running = 8 + r % 5;
  }
  auto policy = std::move(*make_policy("cache_aware"));
  RouteRequest request;
  request.block_hashes = prefixes[7];
  request.prompt_tokens = prompt_tokens;
  request.block_size = kBlockSize;
  const Clock::time_point now{};

  for (auto _ : state) {
    RouteDecision d = policy->route(request, views, index, now);
    benchmark::DoNotOptimize(d);
  }
  state.counters["blocks"] = static_cast<double>(blocks);
  state.counters["index_entries"] = static_cast<double>(index.size());
}
BENCHMARK(BM_CacheAwareRoute)
    ->ArgNames({"prompt_tokens", "replicas"})
    ->ArgsProduct({{1024, 32768, 131072}, {8, 64}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
