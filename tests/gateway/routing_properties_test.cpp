// The properties cache_aware promises (gateway/ROUTING.md), each shown on a small fleet.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "gateway/fleet_sim.h"
#include "gateway/routing_fixtures.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

using std::chrono::milliseconds;
using testing::Fleet;
using testing::fleet;
using testing::FleetOptions;
using testing::index_with;
using testing::policy;
using testing::prompt_hashes;
using testing::request_for;

// cache_aware with the earlier spill rule (overload_factor x the fleet mean), which the
// properties below that name it are about.
std::unique_ptr<RoutingPolicy> mean_overload_policy() {
  PolicyConfig config;
  config.cache_aware.memory_aware = false;
  config.cache_aware.duplicate_weight = 0;
  return std::move(*make_policy("cache_aware", config));
}

// The memory-aware cost without the duplicate charge or the tail budget (a holder kept while its
// wait is under the recent prompts' tail): the formula the properties below check.
std::unique_ptr<RoutingPolicy> memory_aware_policy() {
  return std::move(*make_policy("cache_aware:duplicate_weight=0:tail_quantile=0"));
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
  PrefixIndex index({ttl, ttl});  // predictions live ttl from routing
  for (std::size_t r = 0; r < kReplicas; ++r) index.add_replica({});
  auto views = fleet(kReplicas);
  auto p = mean_overload_policy();
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
  auto p = mean_overload_policy();
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

// Memory-aware (the default): a prefix stays on its busy replica until waiting there costs more
// than computing it elsewhere and evicting as much of someone else's cache; then it spreads.
// The choice is always the least cost: load + uncached x (1 + eviction_weight x kv usage).
TEST(RoutingPropertiesTest, AMissCostsItsPrefillPlusWhatItEvicts) {
  constexpr std::size_t kReplicas = 4;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  for (auto& v : views) {
    v.kv_pages_total = 1000;
    v.kv_pages_used = 1000;  // full caches: a copy evicts as much as it stores
  }
  auto p = memory_aware_policy();
  auto old = mean_overload_policy();
  const auto h = prompt_hashes(1, 2048);  // 32k tokens, all cached on replica 0
  for (std::uint64_t b : h) index.apply_stored(0, b);
  // The case the mean rule spills (9000 > 1.5 x 3125 + 4096): waiting 9000 tokens is far
  // cheaper than 32k of prefill and 32k evicted elsewhere.
  views[0].tokens_queued_for_prefill = 9000;
  views[1].tokens_queued_for_prefill = 2000;
  views[2].tokens_queued_for_prefill = 500;
  views[3].tokens_queued_for_prefill = 1000;
  EXPECT_EQ(old->route(request_for(h), views, index, {}).reason, RouteReason::kLoadSpill);
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  // Past 2 x 32768 + 500 of queue, it spreads to the cheapest other replica.
  views[0].tokens_queued_for_prefill = 2 * 32768 + 501;
  d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  // With room in the caches (at most half full) a copy evicts nothing: the plain prefill cost
  // decides.
  for (auto& v : views) v.kv_pages_used = 500;
  views[0].tokens_queued_for_prefill = 32768 + 501;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 2U);
  views[0].tokens_queued_for_prefill = 32768 + 499;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);

  // Three quarters full: pressure 0.5, a copy costs 1.5 x its prefill.
  for (auto& v : views) v.kv_pages_used = 750;
  views[0].tokens_queued_for_prefill = 32768 + 16384 + 499;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);
  views[0].tokens_queued_for_prefill = 32768 + 16384 + 501;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 2U);

  // Random loads, usages and partial matches: the choice is the least cost.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    PrefixIndex idx = index_with(kReplicas);
    const auto prompt = prompt_hashes(trial, 64);
    std::vector<double> cost(kReplicas);
    std::vector<std::size_t> blocks(kReplicas);
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      views[r].tokens_queued_for_prefill = rng() % 12000;
      views[r].kv_pages_used = rng() % 1001;
      const std::size_t cached = 1 + rng() % 64;  // never cold: cold prefixes hash instead
      for (std::size_t i = 0; i < cached; ++i) idx.apply_stored(r, prompt[i]);
      blocks[r] = cached;
    }
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      const double usage = static_cast<double>(views[r].kv_pages_used) / 1000.0;
      const double pressure = std::clamp(2 * usage - 1, 0.0, 1.0);
      cost[r] = static_cast<double>(views[r].tokens_queued_for_prefill) +
                static_cast<double>(1024 - blocks[r] * 16) * (1.0 + pressure);
    }
    d = p->route(request_for(prompt), views, idx, {});
    for (ReplicaId r = 0; r < kReplicas; ++r) ASSERT_LE(cost[d.replica], cost[r]) << trial;
  }
}

// Cache pressure: the prefixes fill ~90 % of the fleet's KV (24 x 96 blocks in 4 x 640), and a
// burst of one group's requests makes its replica busy for a moment. Spilling a copy there evicts
// another group's prefix; the memory-aware cost counts that, the mean-overload rule did not.
TEST(RoutingPropertiesTest, UnderCachePressureAMissCountsWhatItEvicts) {
  auto run = [](std::unique_ptr<RoutingPolicy> p) {
    FleetOptions options;
    options.replicas = 4;
    options.cache_blocks = 640;
    options.prefill_tokens_per_step = 4096;
    Fleet sim(options, std::move(p));
    std::mt19937_64 rng(21);
    std::uint64_t tail = 0;
    for (int step = 0; step < 600; ++step) {
      // A group's questions arrive together (clients of one app), 2 to 8 at once.
      const std::uint64_t group = rng() % 24;
      const std::size_t burst = 2 + rng() % 7;
      for (std::size_t i = 0; i < burst; ++i) sim.submit(prompt_hashes(group, 96, ++tail, 2));
      sim.step();
    }
    return sim.hit_rate();
  };
  const double memory_aware = run(policy("cache_aware"));
  const double mean_overload = run(mean_overload_policy());
  RecordProperty("memory_aware_hit_rate", std::to_string(memory_aware));
  RecordProperty("mean_overload_hit_rate", std::to_string(mean_overload));
  // The ceiling: every prompt's 96 prefix blocks of 98 cached, but each prefix's first request.
  const double ceiling = 96.0 / 98.0;
  EXPECT_GT(memory_aware, mean_overload + 0.05) << memory_aware << " vs " << mean_overload;
  EXPECT_GT(memory_aware, 0.85 * ceiling) << memory_aware;
}

// A new prefix goes to the hash of its first blocks, but not to a replica that evicts faster than
// the others: there it would push out blocks still in use.
TEST(RoutingPropertiesTest, ANewPrefixAvoidsAReplicaThatEvictsFasterThanTheOthers) {
  constexpr std::size_t kReplicas = 4;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware");
  const auto prompt = prompt_hashes(77, 8);
  const Clock::time_point t0{};
  const ReplicaId hashed = p->route(request_for(prompt), views, index, t0).replica;
  // Every replica evicts a little; the hashed one 40 times as much, for ten seconds.
  std::uint64_t next = 1000;
  for (int second = 1; second <= 10; ++second) {
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      const std::size_t evictions = r == hashed ? 400 : 10;
      for (std::size_t i = 0; i < evictions; ++i) {
        index.apply_stored(r, ++next);
        index.apply_removed(r, next);
      }
    }
    // A request of another prefix each second, as traffic would: the policy samples the rates.
    p->route(request_for(prompt_hashes(5000 + second, 8)), views, index,
             t0 + std::chrono::seconds(second));
  }
  const Clock::time_point t1 = t0 + std::chrono::seconds(10);
  const RouteDecision d = p->route(request_for(prompt), views, index, t1);
  EXPECT_EQ(d.reason, RouteReason::kColdAffinity);
  EXPECT_NE(d.replica, hashed);
  // The earlier rule knows nothing of evictions.
  auto old = mean_overload_policy();
  EXPECT_EQ(old->route(request_for(prompt), views, index, t1).replica, hashed);
}

// A mixed fleet: with each replica's speed known, the cost is the predicted time to first token,
// so a fast replica with a queue beats an idle slow one when it answers sooner; on a uniform
// fleet seconds and tokens make the same decisions.
TEST(RoutingPropertiesTest, CostInSecondsIsThePredictedTimeToFirstToken) {
  PrefixIndex index = index_with(2);
  auto views = fleet(2);
  views[0].prefill_seconds_per_token = 1e-5;  // fast
  views[0].decode_seconds_per_sequence = 1e-4;
  views[1].prefill_seconds_per_token = 1e-4;  // ten times slower
  views[1].decode_seconds_per_sequence = 1e-3;
  for (auto& v : views) v.kv_pages_total = 1000;  // empty caches
  views[0].tokens_queued_for_prefill = 3000;
  const auto h = prompt_hashes(9, 64);  // 1024 tokens, cached nowhere but the first block
  index.apply_stored(0, h[0]);
  index.apply_stored(1, h[0]);
  // Seconds: 0 -> (3000 + 1008) x 1e-5 = 0.040 s; 1 -> 1008 x 1e-4 = 0.10 s.
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 0U);
  PolicyConfig tokens;
  tokens.cache_aware.cost_in_seconds = false;  // tokens: 4008 against 1008
  EXPECT_EQ(std::move(*make_policy("cache_aware", tokens))
                ->route(request_for(h), views, index, {})
                .replica,
            1U);
  // Running sequences count at each replica's own step cost: 30 on the fast one (3 ms) are
  // cheaper than 5 on the slow one (5 ms) plus its slower prefill.
  views[0].tokens_queued_for_prefill = 0;
  views[0].running = 30;
  views[1].running = 5;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 0U);

  // Uniform fleet: the same decisions in seconds as in tokens (decode_weight x the per-token
  // time = the per-sequence time), over random loads and matches.
  auto seconds = policy("cache_aware");
  auto plain = std::move(*make_policy("cache_aware", tokens));
  constexpr std::size_t kReplicas = 6;
  auto uniform = fleet(kReplicas);
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    PrefixIndex idx = index_with(kReplicas);
    const auto prompt = prompt_hashes(1000 + trial, 64);
    for (ReplicaId r = 0; r < kReplicas; ++r) {
      ReplicaView& v = uniform[r];
      v.prefill_seconds_per_token = 2e-5;
      v.decode_seconds_per_sequence = 8 * 2e-5;
      v.tokens_queued_for_prefill = rng() % 8000;
      v.running = rng() % 40;
      v.kv_pages_total = 1000;
      v.kv_pages_used = rng() % 1001;
      const std::size_t cached = rng() % 65;
      for (std::size_t i = 0; i < cached; ++i) idx.apply_stored(r, prompt[i]);
    }
    ASSERT_EQ(seconds->route(request_for(prompt), uniform, idx, {}).replica,
              plain->route(request_for(prompt), uniform, idx, {}).replica)
        << trial;
  }
}

// A full batch: the replica holding the prompt has few prefill tokens queued but no place in its
// batch, so a newcomer waits for running sequences to end. That wait is priced while another
// replica would admit at once, and not when every batch is full (the cache decides then).
// Two replicas that announce their speed (a 1024-token miss: 31 ms of prefill), 64 batch places
// and `admission_interval` seconds between two running sequences ending.
std::vector<ReplicaView> batched_fleet(double admission_interval) {
  auto views = fleet(2);
  for (auto& v : views) {
    v.prefill_seconds_per_token = 3e-5;
    v.decode_seconds_per_sequence = 1e-4;
    v.kv_pages_total = 1000;
    v.batch_slots = 64;
    v.admission_interval_seconds = admission_interval;
  }
  return views;
}

TEST(RoutingPropertiesTest, AFullBatchCostsTheWaitForAPlaceWhileAnotherReplicaHasRoom) {
  PrefixIndex index = index_with(2);
  auto views = batched_fleet(0.03);     // a 1024-token miss: 31 ms
  const auto h = prompt_hashes(5, 64);  // 1024 tokens, all held by replica 0
  for (std::uint64_t b : h) index.apply_stored(0, b);
  auto p = policy("cache_aware:duplicate_weight=0");
  views[0].running = 64;
  views[0].waiting = 2;
  views[0].tokens_queued_for_prefill = 40;
  views[0].inflight_requests = 66;
  // An engine that does not announce its batch: the holder looks cheap, 6.6 ms of decode share
  // and 1.2 ms of queued prefill against a 31 ms miss.
  views[0].batch_slots = 0;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);
  views[0].batch_slots = 64;
  // Waiting 100 ms for a place costs more than computing 1024 tokens on the idle replica.
  views[0].admission_wait_seconds = 0.1;
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  // A report with room (60 running, none waiting): the newcomer has a place.
  views[0].admission_wait_seconds = 0;
  views[0].waiting = 0;
  views[0].running = 60;
  views[0].inflight_requests = 60;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);
  // But 6 requests sent since the report fill the batch: the newcomer is 3 past its 64 places,
  // each an admission interval (90 ms), which the report cannot know of yet.
  views[0].inflight_requests = 66;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 1U);
  // Every batch full: the waits are everyone's, the holder keeps the request.
  views[0].admission_wait_seconds = 0.1;
  views[1].running = 64;
  views[1].waiting = 1;
  views[1].inflight_requests = 65;
  views[1].admission_wait_seconds = 0.02;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);
}

// A hot prefix's holder whose batch its siblings filled in a burst: the report showed a place,
// the gateway has sent two requests since, and the newcomer is the first past the batch. It
// waits until the first running sequence ends, next_end_seconds (2 s: the copy is cheaper);
// with next_end_wait false, one admission interval (20 ms: the holder keeps it); with
// cohort_wait, the larger of the two.
TEST(RoutingPropertiesTest, CohortWaitPricesThePlaceAfterABurstAtTheFirstSequencesEnd) {
  PrefixIndex index = index_with(2);
  auto views = batched_fleet(0.02);     // a 1024-token miss: 31 ms, 61 ms as a duplicate
  const auto h = prompt_hashes(5, 64);  // 1024 tokens, all held by replica 0
  for (std::uint64_t b : h) index.apply_stored(0, b);
  views[0].running = 63;
  views[0].inflight_requests = 65;
  views[0].next_end_seconds = 2.0;
  views[1].running = 10;
  views[1].inflight_requests = 10;
  EXPECT_EQ(
      policy("cache_aware:next_end_wait=false")->route(request_for(h), views, index, {}).replica,
      0U);
  for (const char* name : {"cache_aware", "cache_aware:cohort_wait=true"}) {
    RouteDecision d = policy(name)->route(request_for(h), views, index, {});
    EXPECT_EQ(d.replica, 1U) << name;
    EXPECT_EQ(d.reason, RouteReason::kLoadSpill) << name;
  }
  // In steady state the first sequence ends within an interval: the holder keeps it.
  views[0].next_end_seconds = 0.02;
  EXPECT_EQ(policy("cache_aware:cohort_wait=true")->route(request_for(h), views, index, {}).replica,
            0U);
}

// next_end_wait: the first request past a batch whose report showed a place waits for its first
// running sequence to end, which the report gives, not the steady state's mean interval. Here
// the interval is 150 ms (the copy, 61 ms, is cheaper) but the first sequence ends in 5 ms: the
// holder keeps it. Without the report's figure, one interval.
TEST(RoutingPropertiesTest, TheFirstRequestPastABatchWaitsForItsNextEndNotAMeanInterval) {
  PrefixIndex index = index_with(2);
  auto views = batched_fleet(0.15);
  const auto h = prompt_hashes(5, 64);  // 1024 tokens, all held by replica 0
  for (std::uint64_t b : h) index.apply_stored(0, b);
  views[0].running = 63;
  views[0].inflight_requests = 64;  // one sent since the report: the newcomer is the first past
  views[0].next_end_seconds = 0.005;
  views[1].running = 10;
  views[1].inflight_requests = 10;
  RouteDecision d = policy("cache_aware")->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_EQ(
      policy("cache_aware:next_end_wait=false")->route(request_for(h), views, index, {}).replica,
      1U);
  views[0].next_end_seconds = 0;  // not reported: one interval
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 1U);
  EXPECT_FALSE(make_policy("cache_aware:next_end_wait=maybe").ok());
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
