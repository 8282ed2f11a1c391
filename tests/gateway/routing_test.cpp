#include "prefixgate/gateway/routing.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gateway/fleet_sim.h"
#include "gateway/routing_fixtures.h"

namespace prefixgate::gateway {
namespace {

using testing::fleet;
using testing::index_with;
using testing::policy;
using testing::prompt_hashes;
using testing::request_for;

const std::vector<std::string> kPolicies = {"round_robin",  "random",          "least_load",
                                            "power_of_two", "consistent_hash", "cache_aware"};

// Two replicas with room in their caches and places in their batches (announced, so a copy that
// skips only a prefill queue is charged the queue factor, 4), replica 0 holding the first `held`
// blocks of `prompt`.
struct HolderAndOther {
  HolderAndOther(std::span<const std::uint64_t> prompt, std::size_t held) {
    for (auto& v : views) {
      v.kv_pages_total = 1000;
      v.batch_slots = 64;
    }
    for (std::size_t i = 0; i < held; ++i) index.apply_stored(0, prompt[i]);
  }
  PrefixIndex index = index_with(2);
  std::vector<ReplicaView> views = fleet(2);
};

TEST(RoutingTest, MakePolicyRefusesUnknownNamesAndBadConfig) {
  for (const auto& name : kPolicies) {
    auto p = make_policy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->name(), name);
  }
  auto unknown = make_policy("fastest");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidValue);
  PolicyConfig bad;
  bad.cache_aware.overload_factor = 0.5;
  auto refused = make_policy("cache_aware", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().param, "routing.cache_aware.overload_factor");
  // cache_aware's parameters after its name: a variant, checked like the config.
  auto variant = make_policy("cache_aware:memory_aware=false:eviction_weight=0.5");
  ASSERT_TRUE(variant.ok());
  EXPECT_EQ((*variant)->name(), "cache_aware");
  for (const char* bad_variant :
       {"cache_aware:memory_aware=yes", "cache_aware:eviction_weight=", "cache_aware:speed=2",
        "cache_aware:eviction_weight=-1", "cache_aware:overload_factor=0.5x"}) {
    EXPECT_FALSE(make_policy(bad_variant).ok()) << bad_variant;
  }
}

TEST(RoutingTest, ReasonNames) {
  EXPECT_STREQ(route_reason_name(RouteReason::kCacheHit), "cache_hit");
  EXPECT_STREQ(route_reason_name(RouteReason::kNoHealthyReplica), "no_healthy_replica");
}

TEST(RoutingTest, NoPolicyChoosesAnUnhealthyReplica) {
  PrefixIndex index = index_with(5);
  auto views = fleet(5);
  views[0].healthy = views[2].healthy = views[3].healthy = false;
  // Make the unhealthy ones the most attractive: idle and holding the prefix.
  const auto h = prompt_hashes(1, 8);
  for (std::uint64_t hash : h) index.apply_stored(0, hash);
  views[1].tokens_queued_for_prefill = views[4].tokens_queued_for_prefill = 50000;
  for (const auto& name : kPolicies) {
    auto p = policy(name);
    for (int i = 0; i < 50; ++i) {
      const auto key = std::to_string(i);
      const auto hashes = i % 2 ? h : prompt_hashes(i, 8);  // outlives the request's span
      RouteRequest req = request_for(hashes);
      req.session_key = key;
      const RouteDecision d = p->route(req, views, index, {});
      ASSERT_NE(d.reason, RouteReason::kNoHealthyReplica) << name;
      EXPECT_TRUE(d.replica == 1 || d.replica == 4) << name << " chose " << d.replica;
    }
  }
}

TEST(RoutingTest, EveryPolicySaysNoHealthyReplicaWhenNoneIs) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  for (auto& v : views) v.healthy = false;
  const auto h = prompt_hashes(1, 4);
  for (const auto& name : kPolicies) {
    EXPECT_EQ(policy(name)->route(request_for(h), views, index, {}).reason,
              RouteReason::kNoHealthyReplica)
        << name;
    EXPECT_EQ(policy(name)->route(request_for(h), {}, index_with(0), {}).reason,
              RouteReason::kNoHealthyReplica)
        << name << " with no replicas";
  }
}

TEST(RoutingTest, EveryPolicyReportsThePredictedCachedTokensOfItsChoice) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  const auto h = prompt_hashes(1, 10);
  for (ReplicaId r = 0; r < 3; ++r) {
    for (std::size_t i = 0; i < 2 + 3 * r; ++i) index.apply_stored(r, h[i]);  // 2, 5, 8 blocks
  }
  for (const auto& name : kPolicies) {
    auto p = policy(name);
    for (int i = 0; i < 10; ++i) {
      const RouteDecision d = p->route(request_for(h), views, index, {});
      EXPECT_EQ(d.predicted_cached_tokens, (2 + 3 * d.replica) * 16) << name;
    }
  }
}

TEST(RoutingTest, RoundRobinCyclesOverHealthyReplicas) {
  PrefixIndex index = index_with(4);
  auto views = fleet(4);
  auto p = policy("round_robin");
  const auto h = prompt_hashes(1, 2);
  std::vector<ReplicaId> got;
  for (int i = 0; i < 8; ++i) got.push_back(p->route(request_for(h), views, index, {}).replica);
  EXPECT_EQ(got, (std::vector<ReplicaId>{0, 1, 2, 3, 0, 1, 2, 3}));
  views[2].healthy = false;
  got.clear();
  for (int i = 0; i < 6; ++i) got.push_back(p->route(request_for(h), views, index, {}).replica);
  EXPECT_EQ(got, (std::vector<ReplicaId>{0, 1, 3, 0, 1, 3}));
}

TEST(RoutingTest, RandomIsReproducibleFromItsSeedAndUsesEveryReplica) {
  PrefixIndex index = index_with(4);
  auto views = fleet(4);
  PolicyConfig config;
  config.seed = 42;
  auto a = policy("random", config);
  auto b = policy("random", config);
  std::set<ReplicaId> seen;
  const auto h = prompt_hashes(1, 2);
  for (int i = 0; i < 200; ++i) {
    const ReplicaId ra = a->route(request_for(h), views, index, {}).replica;
    EXPECT_EQ(ra, b->route(request_for(h), views, index, {}).replica);
    seen.insert(ra);
  }
  EXPECT_EQ(seen.size(), 4U);
}

TEST(RoutingTest, LeastLoadPicksTheLeastLoadedAndCountsInflightWork) {
  PrefixIndex index = index_with(4);
  auto views = fleet(4);
  views[0].tokens_queued_for_prefill = 900;
  views[1].running = 20;  // 20 x decode_weight 8 = 160
  views[2].tokens_queued_for_prefill = 100;
  views[2].inflight_prompt_tokens = 5000;  // sent since the last report: the report is stale
  views[3].tokens_queued_for_prefill = 300;
  auto p = policy("least_load");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(p->route(request_for(prompt_hashes(i, 2)), views, index, {}).replica, 1U);
  }
}

TEST(RoutingTest, PowerOfTwoPicksTheLessLoadedOfItsPair) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  views[0].tokens_queued_for_prefill = 10;
  views[1].tokens_queued_for_prefill = 20;
  views[2].tokens_queued_for_prefill = 30;
  auto p = policy("power_of_two");
  std::map<ReplicaId, int> count;
  const auto h = prompt_hashes(1, 2);
  for (int i = 0; i < 3000; ++i) ++count[p->route(request_for(h), views, index, {}).replica];
  // Pairs {0,1}, {0,2}, {1,2} equally likely: 0 wins 2/3, 1 wins 1/3, 2 never.
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0], 2000, 150);
  EXPECT_NEAR(count[1], 1000, 150);
  // With two replicas the pair is always both: the less loaded always wins.
  auto two = fleet(2);
  two[0].running = 5;
  PrefixIndex index2 = index_with(2);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p->route(request_for(h), two, index2, {}).replica, 1U);
}

TEST(RoutingTest, ConsistentHashIsStickyAndMovesFewKeysWhenAReplicaJoins) {
  constexpr int kKeys = 4000;
  auto p = policy("consistent_hash");
  auto route_all = [&](std::size_t n) {
    PrefixIndex index = index_with(n);
    auto views = fleet(n);
    views[0].tokens_queued_for_prefill = 100000;  // load must not matter with a key
    std::vector<ReplicaId> out;
    const auto h = prompt_hashes(1, 2);
    for (int k = 0; k < kKeys; ++k) {
      RouteRequest req = request_for(h);
      const std::string key = "user-" + std::to_string(k);
      req.session_key = key;
      const RouteDecision d = p->route(req, views, index, {});
      EXPECT_EQ(d.reason, RouteReason::kSessionAffinity);
      out.push_back(d.replica);
    }
    return out;
  };
  const auto before = route_all(8);
  EXPECT_EQ(before, route_all(8));
  std::map<ReplicaId, int> per_replica;
  for (ReplicaId r : before) ++per_replica[r];
  for (ReplicaId r = 0; r < 8; ++r) EXPECT_GT(per_replica[r], kKeys / 8 / 2) << r;
  const auto after = route_all(9);
  int moved = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (before[k] != after[k]) {
      ++moved;
      EXPECT_EQ(after[k], 8U) << "a key moved between old replicas";
    }
  }
  EXPECT_NEAR(moved, kKeys / 9, kKeys / 30);  // ~1/9 of the keys, to the new replica only
}

TEST(RoutingTest, ConsistentHashWithoutAKeyGoesToTheLeastLoaded) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  views[0].running = 3;
  views[2].running = 1;
  views[1].running = 9;
  const RouteDecision d =
      policy("consistent_hash")->route(request_for(prompt_hashes(1, 2)), views, index, {});
  EXPECT_EQ(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kLeastLoad);
}

// cache_aware's cost: a hit is worth exactly the prefill it saves.
TEST(CacheAwareTest, AHitIsWorthExactlyThePrefillItSaves) {
  PrefixIndex index = index_with(2);
  auto views = fleet(2);
  for (auto& v : views) v.kv_pages_total = 1000;  // caches with room: a miss evicts nothing
  const auto h = prompt_hashes(1, 64);            // 1024 tokens
  for (std::size_t i = 0; i < 32; ++i) index.apply_stored(0, h[i]);  // 512 cached on 0
  auto p = policy("cache_aware:duplicate_weight=0");  // the cost alone (the copy: see below)
  views[0].tokens_queued_for_prefill = 500;           // cost 0: 512 + 500 < cost 1: 1024
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_EQ(d.predicted_cached_tokens, 512U);
  views[0].tokens_queued_for_prefill = 530;  // 512 + 530 > 1024: the idle replica is cheaper
  d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  EXPECT_EQ(d.predicted_cached_tokens, 0U);
  // Decodes count decode_weight (8) tokens each; the gateway's in-flight count covers a stale
  // report.
  views[0].tokens_queued_for_prefill = 0;
  views[0].running = 60;  // 480
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 0U);
  views[0].running = 0;
  views[0].inflight_requests = 66;  // 528
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 1U);
  views[0].inflight_requests = 0;
  views[0].inflight_prompt_tokens = 600;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 1U);
}

// gateways: several gateways see the same footprints in the engines' events, and each sees only
// its own new prefixes in flight. Placed by the smallest footprint alone, all their new prefixes
// would go to the same replica; with the gateway count, a prefix's rendezvous hash chooses among
// the replicas within (gateways - 1) prompts of the smallest, so prefixes spread and every
// gateway agrees on each.
TEST(CacheAwareTest, SeveralGatewaysSpreadNewPrefixesAndAgreeOnEach) {
  PrefixIndex index = index_with(8);
  auto views = fleet(8);
  for (auto& v : views) v.kv_pages_total = 1000;
  // Replica 0 is empty, 1-6 hold 10 blocks each, 7 holds 200: prompts of 8 blocks give a slack
  // of 9 x 8 = 72 blocks at 10 gateways, so 0-6 are candidates and 7 is not.
  for (ReplicaId r = 1; r < 7; ++r) {
    for (std::uint64_t h : prompt_hashes(100 + r, 10)) index.apply_stored(r, h);
  }
  for (std::uint64_t h : prompt_hashes(107, 200)) index.apply_stored(7, h);
  // Another gateway of the ten, with a new prefix of its own in flight on replica 3.
  auto other_views = views;
  other_views[3].inflight_prompt_tokens = 128;
  auto one = policy("cache_aware");
  auto ten = policy("cache_aware:gateways=10");
  auto ten_other = policy("cache_aware:gateways=10");
  std::set<ReplicaId> chosen;
  for (std::uint64_t p = 0; p < 32; ++p) {
    const auto h = prompt_hashes(1000 + p, 8);
    const RouteDecision single = one->route(request_for(h), views, index, {});
    EXPECT_EQ(single.replica, 0U) << "one gateway: the smallest footprint";
    EXPECT_EQ(single.reason, RouteReason::kColdAffinity);
    const RouteDecision d = ten->route(request_for(h), views, index, {});
    EXPECT_EQ(d.reason, RouteReason::kColdAffinity);
    EXPECT_NE(d.replica, 7U) << "not past the slack";
    EXPECT_EQ(ten_other->route(request_for(h), other_views, index, {}).replica, d.replica)
        << "gateways that differ by their own requests in flight agree on a prefix";
    chosen.insert(d.replica);
  }
  EXPECT_GE(chosen.size(), 5U) << "new prefixes spread over the candidates";
  // The option is a count of at least one.
  for (const char* bad : {"cache_aware:gateways=0", "cache_aware:gateways=-1",
                          "cache_aware:gateways=2.5", "cache_aware:gateways="}) {
    EXPECT_FALSE(make_policy(bad).ok()) << bad;
  }
}

// gateway_spill_slack: among several gateways the replica a spill would go to is the one that
// looks cheapest, the likeliest to have been sent more by the other gateways than this one sees.
// The holder keeps the request unless the spill saves more than (gateways - 1) x its prompt's
// prefill, capped at gateway_spill_slack (2) prefills of a prompt at tail_quantile. One gateway
// decides as before.
TEST(CacheAwareTest, SeveralGatewaysSpillOnlyPastWhatTheOthersMayHaveSent) {
  const auto h = prompt_hashes(1, 8);  // 128 tokens
  HolderAndOther fleet2(h, 7);         // 112 cached on 0
  PrefixIndex& index = fleet2.index;
  auto& views = fleet2.views;
  // Replica 1 costs 128 + 4 x 112 = 576, the holder 700 + 16 = 716: past the tail budget (only
  // this 128-token prompt seen), and by the cost a spill.
  views[0].tokens_queued_for_prefill = 700;
  auto route = [&](std::string_view name) {
    return policy(name)->route(request_for(h), views, index, {});
  };
  EXPECT_EQ(route("cache_aware").replica, 1U) << "one gateway: the cost decides";
  EXPECT_EQ(route("cache_aware:gateways=10:gateway_spill_slack=0").replica, 1U) << "off";
  // 10 gateways: the slack is min(9 x 128, 2 x 128) = 256, and 716 <= 576 + 256: kept.
  const RouteDecision d = route("cache_aware:gateways=10");
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  // 2 gateways: 1 x 128, and 716 > 576 + 128: spilled.
  EXPECT_EQ(route("cache_aware:gateways=2").replica, 1U);
  // The cap: 916 > 576 + 256 at 10 gateways; a larger cap (4 x 128) keeps it again.
  views[0].tokens_queued_for_prefill = 900;
  EXPECT_EQ(route("cache_aware:gateways=10").replica, 1U);
  EXPECT_EQ(route("cache_aware:gateways=10:gateway_spill_slack=4").replica, 0U);
  for (const char* bad : {"cache_aware:gateway_spill_slack=-1", "cache_aware:gateway_spill_slack=x",
                          "cache_aware:gateway_spill_slack=inf"}) {
    EXPECT_FALSE(make_policy(bad).ok()) << bad;
  }
}

// duplicate_weight: a copy of what the best holder already has costs the fleet its prefill again,
// so the holder is given up only when its queue outweighs the miss plus that duplicate work.
TEST(CacheAwareTest, DuplicateWeightChargesACopyOfWhatTheBestHolderHas) {
  PrefixIndex index = index_with(2);
  auto views = fleet(2);
  for (auto& v : views) v.kv_pages_total = 1000;
  const auto h = prompt_hashes(1, 64);                               // 1024 tokens
  for (std::size_t i = 0; i < 32; ++i) index.apply_stored(0, h[i]);  // 512 cached on 0
  views[0].tokens_queued_for_prefill = 530;  // weight 0: 512 + 530 > 1024, spilled
  EXPECT_EQ(
      policy("cache_aware:duplicate_weight=0")->route(request_for(h), views, index, {}).replica,
      1U);
  // The default, 1: replica 1 costs 1024 + 512 > 1042, so the holder keeps it (its batch is not
  // announced, so the queue factor does not apply).
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 0U);
  // Weight 1: replica 1 costs 1024 + 512 (the copy of the 512 replica 0 holds) = 1536.
  auto dup = policy("cache_aware:duplicate_weight=1");
  RouteDecision d = dup->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  views[0].tokens_queued_for_prefill = 1030;  // 512 + 1030 > 1536: now the copy pays
  d = dup->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  PolicyConfig bad;
  bad.cache_aware.duplicate_weight = -1;
  EXPECT_FALSE(make_policy("cache_aware", bad).ok());
}

// queue_duplicate_factor: when the best holder has a place in its batch, what a copy skips is a
// prefill queue the holder drains within milliseconds, so the copy is charged the factor (default
// 4) x duplicate_weight; when the holder's batch is full (it reports a wait for a place), the
// charge is duplicate_weight alone, so a hot prefix still gets the copies it needs.
TEST(CacheAwareTest, ACopyThatSkipsOnlyAPrefillQueueIsChargedTheQueueFactor) {
  const auto h = prompt_hashes(1, 64);  // 1024 tokens
  HolderAndOther fleet2(h, 32);         // 512 cached on 0; 0 reports no wait: a place
  PrefixIndex& index = fleet2.index;
  auto& views = fleet2.views;
  views[0].tokens_queued_for_prefill = 1030;
  // A place in 0's batch: replica 1 costs 1024 + 4 x 512 = 3072 > 512 + 1030, so 0 keeps it.
  auto p = policy("cache_aware");
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  // Factor 1: replica 1 costs 1024 + 512 = 1536 < 1542, the earlier charge spills.
  EXPECT_EQ(policy("cache_aware:queue_duplicate_factor=1")
                ->route(request_for(h), views, index, {})
                .replica,
            1U);
  // 0's batch is full (a wait for a place): duplicate_weight alone, 1536 < 1542, spilled.
  views[0].admission_wait_seconds = 0.5;
  d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  // A replica that does not announce its batch (vLLM, SGLang) may be full: duplicate_weight alone.
  views[0].admission_wait_seconds = 0;
  views[0].batch_slots = 0;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 1U);
  // With a place again, a queue past the factor's charge spills: 512 + 2600 > 3072.
  views[0].batch_slots = 64;
  views[0].tokens_queued_for_prefill = 2600;
  EXPECT_EQ(p->route(request_for(h), views, index, {}).replica, 1U);
  // With duplicate_weight 0 there is no charge to multiply: the cost alone, 512 + 1030 > 1024.
  views[0].tokens_queued_for_prefill = 530;
  EXPECT_EQ(
      policy("cache_aware:duplicate_weight=0")->route(request_for(h), views, index, {}).replica,
      1U);
  PolicyConfig bad;
  bad.cache_aware.queue_duplicate_factor = -1;
  EXPECT_FALSE(make_policy("cache_aware", bad).ok());
  EXPECT_FALSE(make_policy("cache_aware:queue_duplicate_factor=x").ok());
}

// tail_quantile: a request stays on the holder of its longest match while its predicted time to
// first token there is at most the prefill of a prompt at that quantile of the recent prompts'
// lengths: a wait that short leaves it out of the tail, and the hit it keeps is the fleet's. Past
// the budget the cost decides as before.
TEST(CacheAwareTest, AHolderIsKeptWhileTheWaitStaysUnderTheTailPromptsPrefill) {
  const auto h = prompt_hashes(1, 8);  // 128 tokens
  HolderAndOther fleet2(h, 7);         // 112 cached on 0
  PrefixIndex& index = fleet2.index;
  auto& views = fleet2.views;
  // Replica 1 costs 128 + 4 x 112 = 576; the holder 1000 queued + 16 = 1016: by the cost alone,
  // spilled.
  views[0].tokens_queued_for_prefill = 1000;
  auto with_long_prompts = [&](std::string_view name) {
    auto p = policy(name);
    const auto long_prompt = prompt_hashes(2, 256);  // 4096 tokens, cold
    for (int i = 0; i < 4; ++i) p->route(request_for(long_prompt), views, index, {});
    return p;
  };
  EXPECT_EQ(with_long_prompts("cache_aware:tail_quantile=0")
                ->route(request_for(h), views, index, {})
                .replica,
            1U);
  // The recent prompts' tail is 4096 tokens: the holder's 1016 is within it, kept.
  auto p = with_long_prompts("cache_aware");
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  // Past the budget (5000 + 16 > 4096) the cost decides: spilled.
  views[0].tokens_queued_for_prefill = 5000;
  d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLoadSpill);
  // Only short prompts seen: the budget is theirs, 128 tokens, and a 1016-token wait is past it.
  views[0].tokens_queued_for_prefill = 1000;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 1U);
  // Several gateways: each sees its own sends alone, so the holder's queue is taken as at least
  // gateways x its own in flight. 4 x 900 = 3600 (+ 16) is within 4096, 4 x 1100 is not.
  views[0].tokens_queued_for_prefill = 0;
  views[0].inflight_prompt_tokens = 900;
  EXPECT_EQ(
      with_long_prompts("cache_aware:gateways=4")->route(request_for(h), views, index, {}).replica,
      0U);
  views[0].inflight_prompt_tokens = 1100;
  EXPECT_EQ(
      with_long_prompts("cache_aware:gateways=4")->route(request_for(h), views, index, {}).replica,
      1U);
  for (const char* bad : {"cache_aware:tail_quantile=-0.1", "cache_aware:tail_quantile=1.5",
                          "cache_aware:tail_quantile=x"}) {
    EXPECT_FALSE(make_policy(bad).ok()) << bad;
  }
}

TEST(CacheAwareTest, AnOffloadedHitSavesItsWeightOfPrefill) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  for (auto& v : views) v.kv_pages_total = 1000;  // caches with room: a miss evicts nothing
  const auto h = prompt_hashes(1, 64);            // 1024 tokens
  for (std::size_t i = 0; i < 32; ++i) {
    index.apply_stored(0, h[i], CacheTier::kPrimary);  // 512 on the device
    index.apply_stored(1, h[i], CacheTier::kOffload);  // 512 in CPU memory: worth 0.8 x 512
  }
  auto p = policy("cache_aware:duplicate_weight=0");  // the hit's worth alone
  RouteDecision d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);  // the device hit is worth more
  views[0].tokens_queued_for_prefill = 200;
  // cost 0 = 512 + 200 = 712; cost 1 = 1024 - 409.6 = 614.4; cost 2 = 1024.
  d = p->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.predicted_cached_tokens, 512U);  // what the engine will report as cached
  // At weight 1 an offloaded hit is a device hit; at 0 a miss.
  PolicyConfig full;
  full.cache_aware.duplicate_weight = 0;
  full.cache_aware.offload_hit_weight = 1.0;
  views[0].tokens_queued_for_prefill = 1;
  EXPECT_EQ(policy("cache_aware", full)->route(request_for(h), views, index, {}).replica, 1U);
  PolicyConfig none;
  none.cache_aware.duplicate_weight = 0;
  none.cache_aware.offload_hit_weight = 0.0;
  views[0].tokens_queued_for_prefill = 600;  // 1112 > 1024: the offloaded copy saves nothing
  views[1].running = 1;                      // 1032: no tie with the empty replica
  EXPECT_EQ(policy("cache_aware", none)->route(request_for(h), views, index, {}).replica, 2U);
  PolicyConfig bad;
  bad.cache_aware.offload_hit_weight = 1.5;
  EXPECT_FALSE(make_policy("cache_aware", bad).ok());
}

// The default: a cold prefix goes to the replica with the fewest blocks cached plus uncached
// blocks in flight; ties (an empty fleet) to the hash of its first blocks.
TEST(CacheAwareTest, ColdPrefixGoesWhereTheLeastContentIsCached) {
  constexpr std::size_t kReplicas = 4;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware");
  // Blocks held: 40, 10, 30, 20 (other prompts' blocks).
  const std::size_t held[kReplicas] = {40, 10, 30, 20};
  for (ReplicaId r = 0; r < kReplicas; ++r) {
    for (std::uint64_t b : prompt_hashes(1000 + r, held[r])) index.apply_stored(r, b);
  }
  RouteDecision d = p->route(request_for(prompt_hashes(1, 8)), views, index, {});
  EXPECT_EQ(d.reason, RouteReason::kColdAffinity);
  EXPECT_EQ(d.replica, 1U);
  // Uncached prompt tokens in flight count as the blocks they will add (16 per block): 10 + 15
  // on replica 1 makes replica 3 (20) the smallest. (A 512-token prompt: 240 tokens in flight
  // are less than its prefill, so replica 1 stays eligible by load.)
  views[1].inflight_prompt_tokens = 15 * 16;
  d = p->route(request_for(prompt_hashes(2, 32)), views, index, {});
  EXPECT_EQ(d.replica, 3U);
  views[1].inflight_prompt_tokens = 5 * 16;  // 10 + 5: replica 1 again
  EXPECT_EQ(p->route(request_for(prompt_hashes(2, 32)), views, index, {}).replica, 1U);
  views[1].inflight_prompt_tokens = 15 * 16;
  // A queue shorter than the prompt's own prefill (128 tokens) does not move it: the queue is a
  // moment, the prefix's traffic lasts.
  views[3].tokens_queued_for_prefill = 100;
  EXPECT_EQ(p->route(request_for(prompt_hashes(3, 8)), views, index, {}).replica, 3U);
  // A longer one does: the first request would wait more than computing the prompt again
  // elsewhere, so the smallest footprint among the others (replica 2, 30 blocks) takes it.
  views[3].tokens_queued_for_prefill = 5000;
  EXPECT_EQ(p->route(request_for(prompt_hashes(4, 8)), views, index, {}).replica, 2U);

  // An empty fleet: siblings (same first 4 blocks) agree, and distinct prefixes spread.
  PrefixIndex empty = index_with(6);
  auto idle = fleet(6);
  std::set<ReplicaId> used;
  for (std::uint64_t prefix = 0; prefix < 60; ++prefix) {
    const RouteDecision a = p->route(request_for(prompt_hashes(prefix, 4, 1, 8)), idle, empty, {});
    const RouteDecision b = p->route(request_for(prompt_hashes(prefix, 4, 2, 3)), idle, empty, {});
    EXPECT_EQ(a.replica, b.replica);
    used.insert(a.replica);
  }
  EXPECT_EQ(used.size(), 6U);
}

TEST(CacheAwareTest, ColdRendezvousFollowsTheHashOfItsFirstBlocksWithinTheLoadBound) {
  constexpr std::size_t kReplicas = 6;
  PrefixIndex index = index_with(kReplicas);
  auto views = fleet(kReplicas);
  auto p = policy("cache_aware:cold_rendezvous=true");
  std::set<ReplicaId> used;
  for (std::uint64_t prefix = 0; prefix < 60; ++prefix) {
    // Siblings: same first 4 blocks (affinity_blocks), different after.
    const RouteDecision a = p->route(request_for(prompt_hashes(prefix, 4, 1, 8)), views, index, {});
    const RouteDecision b = p->route(request_for(prompt_hashes(prefix, 4, 2, 3)), views, index, {});
    EXPECT_EQ(a.reason, RouteReason::kColdAffinity);
    EXPECT_EQ(a.replica, b.replica);
    used.insert(a.replica);
  }
  EXPECT_EQ(used.size(), kReplicas);  // the hash spreads distinct prefixes over the fleet
  // Above bounded_load_factor x mean a replica takes no cold prefix; the others keep theirs.
  const auto probe = prompt_hashes(777, 6);
  const ReplicaId favourite = p->route(request_for(probe), views, index, {}).replica;
  views[favourite].tokens_queued_for_prefill = 2000;  // mean 333, bound 417
  const RouteDecision moved = p->route(request_for(probe), views, index, {});
  EXPECT_NE(moved.replica, favourite);
  EXPECT_EQ(moved.reason, RouteReason::kColdAffinity);
}

TEST(CacheAwareTest, PromptShorterThanABlockGoesToTheLeastCost) {
  PrefixIndex index = index_with(3);
  auto views = fleet(3);
  views[0].running = 4;
  views[1].running = 2;
  views[2].running = 3;
  RouteRequest req;
  req.prompt_tokens = 10;
  const RouteDecision d = policy("cache_aware")->route(req, views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLeastCost);
}

}  // namespace
}  // namespace prefixgate::gateway
