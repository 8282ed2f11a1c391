// The properties cache_aware promises (gateway/ROUTING.md), each shown on a small fleet.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

using std::chrono::milliseconds;
using testing::Fleet;
using testing::FleetOptions;
using testing::prompt_hashes;
using testing::request_for;

std::unique_ptr<RoutingPolicy> policy(std::string_view name) {
  return std::move(*make_policy(name));
}

std::vector<ReplicaView> fleet(std::size_t n) {
  std::vector<ReplicaView> views(n);
  for (std::size_t r = 0; r < n; ++r) views[r].id = static_cast<ReplicaId>(r);
  return views;
}

PrefixIndex index_with(std::size_t replicas) {
  PrefixIndex index;
  for (std::size_t r = 0; r < replicas; ++r) index.add_replica({});
  return index;
}

// Siblings of a new prefix arrive back to back, before any kv_event: the gateway's predictions
// alone must keep them together, here even when a shared system prompt is cached everywhere
// (so the prefix is not cold and only predictions + tie-breaking can converge).
TEST(RoutingPropertiesTest, SiblingsOfANewPrefixConvergeOnOneReplica) {
  for (bool system_prompt_everywhere : {false, true}) {
    constexpr std::size_t kReplicas = 8;
    PrefixIndex index = index_with(kReplicas);
    auto views = fleet(kReplicas);
    auto p = policy("cache_aware");
    const auto system = prompt_hashes(5, 2);
    if (system_prompt_everywhere) {
      for (ReplicaId r = 0; r < kReplicas; ++r) index.apply_snapshot(r, system);
    }
    for (std::uint64_t doc = 0; doc < 20; ++doc) {
      std::set<ReplicaId> chosen;
      for (std::uint64_t q = 0; q < 12; ++q) {
        // Same system prompt + document (10 blocks), a different question (3 blocks).
        auto h = system_prompt_everywhere ? system : std::vector<std::uint64_t>{};
        const auto rest = prompt_hashes(100 + doc, 10, q, 3);
        h.insert(h.end(), rest.begin(), rest.end());
        const RouteDecision d = p->route(request_for(h), views, index, {});
        index.predict(d.replica, h, {});
        chosen.insert(d.replica);
        // Balanced load: every replica gets the same small queue over time.
        for (auto& v : views) v.tokens_queued_for_prefill = 64 * (doc + 1);
      }
      EXPECT_EQ(chosen.size(), 1U) << "doc " << doc << " system " << system_prompt_everywhere;
    }
  }
}

// One replica holds a hot prefix; every routed request adds its uncached prefill there. Demand
// beyond that replica spreads the prefix to a second; when demand falls (queues drain and the
// second copy is not confirmed), the prefix goes back to the first replica only.
TEST(RoutingPropertiesTest, HotPrefixSpreadsUnderLoadAndStopsWhenDemandFalls) {
  constexpr std::size_t kReplicas = 4;
  const milliseconds ttl(2000);
  PrefixIndex index({ttl});
  for (std::size_t r = 0; r < kReplicas; ++r) index.add_replica({});
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware");
  const auto hot = prompt_hashes(1, 2048);  // a 32k-token prefix
  for (std::uint64_t h : hot) index.apply_stored(0, h);
  Clock::time_point now{};

  std::set<ReplicaId> holders;
  bool spilled_by_overload = false;
  for (std::uint64_t q = 0; q < 40; ++q) {
    auto h = hot;
    const auto tail = prompt_hashes(1000 + q, 1, q, 31);  // a 512-token question
    h.insert(h.end(), tail.begin() + 1, tail.end());
    const RouteRequest req = request_for(h);
    const RouteDecision d = p->route(req, views, index, now);
    if (d.replica != 0 && holders.size() == 1) {
      // The first spill happens on the overload rule, before cost alone would move it: the 32k
      // cached tokens are worth more than replica 0's extra queue.
      EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
      spilled_by_overload =
          views[0].tokens_queued_for_prefill < views[d.replica].tokens_queued_for_prefill + 32768;
    }
    holders.insert(d.replica);
    index.predict(d.replica, h, now);
    views[d.replica].tokens_queued_for_prefill += req.prompt_tokens - d.predicted_cached_tokens;
  }
  EXPECT_GE(holders.size(), 2U) << "the hot prefix never spread";
  EXPECT_TRUE(spilled_by_overload);
  // Replication, not scattering: only as many copies as the demand needs.
  EXPECT_LE(holders.size(), 3U);

  // Demand falls: queues drain, predictions on the extra replicas expire unconfirmed.
  for (auto& v : views) v.tokens_queued_for_prefill = 0;
  now += ttl;
  for (std::uint64_t q = 0; q < 20; ++q) {
    auto h = hot;
    h.push_back(testing::mix(q + 99));
    const RouteDecision d = p->route(request_for(h), views, index, now);
    EXPECT_EQ(d.replica, 0U);
    EXPECT_EQ(d.reason, RouteReason::kCacheHit);
    views[0].tokens_queued_for_prefill += 16;  // light demand
  }
}

TEST(RoutingPropertiesTest, ALoadedReplicaDoesNotTurnAffinityOffForOthers) {
  constexpr std::size_t kReplicas = 4;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware");
  std::vector<std::vector<std::uint64_t>> prefixes;
  for (ReplicaId r = 0; r < kReplicas; ++r) {
    prefixes.push_back(prompt_hashes(r, 64));
    index.apply_snapshot(r, prefixes.back());
    views[r].tokens_queued_for_prefill = 600;
  }
  views[0].tokens_queued_for_prefill = 200000;  // replica 0 is drowning
  views[0].running = 100;
  for (ReplicaId r = 1; r < kReplicas; ++r) {
    auto h = prefixes[r];
    h.push_back(testing::mix(r));
    const RouteDecision d = p->route(request_for(h), views, index, {});
    EXPECT_EQ(d.replica, r);
    EXPECT_EQ(d.reason, RouteReason::kCacheHit);
    EXPECT_EQ(d.predicted_cached_tokens, 64U * 16);
  }
  // Replica 0's own prefix moves elsewhere instead of queueing.
  EXPECT_NE(p->route(request_for(prefixes[0]), views, index, {}).replica, 0U);
}

TEST(RoutingPropertiesTest, AMissGoesWhereItCostsLeastNeverToAnOverloadedReplica) {
  constexpr std::size_t kReplicas = 4;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware");
  const auto h = prompt_hashes(1, 2048);
  for (std::size_t i = 0; i < 2048; ++i) index.apply_stored(0, h[i]);
  // Replica 0 holds the whole prompt and, counting the cache, is cheapest (9000 < 32768 + 500)
  // but it is overloaded (9000 > 1.5 x 3125 + 4096): the miss goes to the least-cost other one.
  views[0].tokens_queued_for_prefill = 9000;
  views[1].tokens_queued_for_prefill = 2000;
  views[2].tokens_queued_for_prefill = 500;
  views[3].tokens_queued_for_prefill = 1000;
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);

  // Random loads and random partial matches: the choice is never overloaded, and is the least
  // cost among the replicas that are not.
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    PrefixIndex idx = index_with(kReplicas);
    const auto prompt = prompt_hashes(trial, 64);
    double total = 0;
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      views[r].tokens_queued_for_prefill = rng() % 12000;
      total += static_cast<double>(views[r].tokens_queued_for_prefill);
      const std::size_t cached = rng() % 65;
      for (std::size_t i = 0; i < cached; ++i) idx.apply_stored(r, prompt[i]);
    }
    const double bound = 1.5 * total / kReplicas + 4096;
    d = p->route(request_for(prompt), views, idx, {});
    ASSERT_LE(static_cast<double>(views[d.replica].tokens_queued_for_prefill), bound);
    std::vector<std::size_t> blocks(kReplicas);
    idx.longest_match(prompt, {}, blocks);
    const double chosen_cost = static_cast<double>(views[d.replica].tokens_queued_for_prefill +
                                                   1024 - blocks[d.replica] * 16);
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      if (static_cast<double>(views[r].tokens_queued_for_prefill) > bound) continue;
      const double cost =
          static_cast<double>(views[r].tokens_queued_for_prefill + 1024 - blocks[r] * 16);
      if (blocks[0] + blocks[1] + blocks[2] + blocks[3] > 0) {  // cold prefixes hash instead
        ASSERT_LE(chosen_cost, cost);
      }
    }
  }
}

// Shared-prefix traffic with a hot prefix; each step every replica prefills a fixed number of
// tokens. A replica must not sit idle while another has a real queue.
TEST(RoutingPropertiesTest, NoReplicaIdlesWhileAnotherQueues) {
  FleetOptions options;
  options.replicas = 4;
  options.prefill_tokens_per_step = 2048;
  Fleet sim(options, policy("cache_aware"));
  std::mt19937_64 rng(11);
  constexpr std::size_t kQueued = 4096;  // two prompts' worth
  int streak = 0;
  int worst_streak = 0;
  std::uint64_t next_tail = 0;
  for (int step = 0; step < 2000; ++step) {
    // 2..5 requests of 2048 tokens: 1536-token prefix (70% one hot prefix) + unique tail.
    const std::size_t arrivals = 2 + rng() % 4;
    for (std::size_t i = 0; i < arrivals; ++i) {
      const std::uint64_t prefix = rng() % 10 < 7 ? 0 : 1 + rng() % 20;
      sim.submit(prompt_hashes(prefix, 96, ++next_tail, 32));
    }
    bool idle = false;
    bool queued = false;
    for (ReplicaId r = 0; r < options.replicas; ++r) {
      idle |= sim.queued(r) == 0;
      queued |= sim.queued(r) > kQueued;
    }
    streak = idle && queued ? streak + 1 : 0;
    worst_streak = std::max(worst_streak, streak);
    sim.step();
  }
  EXPECT_LE(worst_streak, 2);
  EXPECT_GT(sim.hit_rate(), 0.5);  // and it did not get there by giving up the cache
}

// cache_aware vs round_robin on the same shared-prefix traffic, the engine's LRU deciding what
// is actually cached: 32 prefixes do not fit in one replica's cache but fit in the fleet's.
TEST(RoutingPropertiesTest, CacheAwareHitRateFarAboveRoundRobin) {
  auto run = [](std::string_view name) {
    FleetOptions options;
    options.replicas = 8;
    options.cache_blocks = 640;
    options.prefill_tokens_per_step = 8192;
    Fleet sim(options, policy(name));
    std::mt19937_64 rng(5);
    std::uint64_t tail = 0;
    for (int step = 0; step < 1000; ++step) {
      for (int i = 0; i < 4; ++i) sim.submit(prompt_hashes(rng() % 32, 64, ++tail, 8));
      sim.step();
    }
    return sim.hit_rate();
  };
  const double cache_aware = run("cache_aware");
  const double round_robin = run("round_robin");
  RecordProperty("cache_aware_hit_rate", std::to_string(cache_aware));
  RecordProperty("round_robin_hit_rate", std::to_string(round_robin));
  EXPECT_GT(cache_aware, 2 * round_robin) << cache_aware << " vs " << round_robin;
  EXPECT_GT(cache_aware, 0.7);
}

}  // namespace
}  // namespace prefixgate::gateway
