// sglang_cache_aware: SGLang's router's documented behaviour, one rule per test.
#include <gtest/gtest.h>

#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;
using testing::request_for;

struct SglangFleet {
  explicit SglangFleet(std::size_t n, SglangCacheAwareConfig config = {}) {
    PolicyConfig pc;
    pc.sglang = config;
    auto p = make_policy("sglang_cache_aware", pc);
    EXPECT_TRUE(p.ok());
    policy = std::move(*p);
    views.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      views[r].id = static_cast<ReplicaId>(r);
      index.add_replica({});
    }
  }
  // Routes and records the request, as the gateway does when it sends one.
  RouteDecision send(const std::vector<std::uint64_t>& hashes) {
    const RouteRequest req = request_for(hashes);
    const RouteDecision d = policy->route(req, views, index, {});
    EXPECT_NE(d.reason, RouteReason::kNoHealthyReplica);
    record_routed(index, *policy, views[d.replica], req, d, {});
    return d;
  }
  std::unique_ptr<RoutingPolicy> policy;
  PrefixIndex index;
  std::vector<ReplicaView> views;
};

TEST(SglangCacheAwareTest, RefusesOutOfRangeParameters) {
  PolicyConfig bad;
  bad.sglang.cache_threshold = 1.5;
  auto refused = make_policy("sglang_cache_aware", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().param, "routing.sglang_cache_aware.cache_threshold");
  bad = {};
  bad.sglang.balance_rel_threshold = 0.5;
  EXPECT_FALSE(make_policy("sglang_cache_aware", bad).ok());
  auto ok = make_policy("sglang_cache_aware");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->name(), "sglang_cache_aware");
}

TEST(SglangCacheAwareTest, NewPrefixesGoToTheSmallestTree) {
  SglangFleet f(4);
  // Each new prefix (no match above the threshold) lands on the replica whose tree is smallest:
  // one prefix per replica, then the one holding the shortest prompt.
  EXPECT_EQ(f.send(prompt_hashes(1, 10)).replica, 0U);
  EXPECT_EQ(f.send(prompt_hashes(2, 6)).replica, 1U);
  EXPECT_EQ(f.send(prompt_hashes(3, 8)).replica, 2U);
  EXPECT_EQ(f.send(prompt_hashes(4, 12)).replica, 3U);
  const RouteDecision d = f.send(prompt_hashes(5, 4));
  EXPECT_EQ(d.replica, 1U);  // 6 blocks: the smallest tree
  EXPECT_EQ(d.reason, RouteReason::kLeastCost);
}

TEST(SglangCacheAwareTest, AMatchAboveTheThresholdGoesToTheReplicaThatWasSentIt) {
  SglangFleet f(4);
  f.send(prompt_hashes(9, 20));  // replica 0
  f.send(prompt_hashes(8, 1));   // replica 1: now the smallest trees are 2 and 3
  // 8 of 20 blocks shared: 40 % > 30 %.
  const RouteDecision d = f.send(prompt_hashes(9, 8, /*tail_id=*/1, 12));
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
}

TEST(SglangCacheAwareTest, AMatchAtOrBelowTheThresholdIsAMiss) {
  SglangFleet f(3);
  f.send(prompt_hashes(9, 20));  // replica 0
  // 6 of 20 blocks shared: exactly 30 %, not above it: the smallest tree (1) wins.
  const RouteDecision d = f.send(prompt_hashes(9, 6, /*tail_id=*/1, 14));
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kLeastCost);
}

TEST(SglangCacheAwareTest, ImbalanceSendsToTheShortestQueueWhateverTheCache) {
  SglangFleet f(3);
  const auto h = prompt_hashes(1, 10);
  EXPECT_EQ(f.send(h).replica, 0U);
  const RouteRequest req = request_for(h);
  // Imbalanced: 100 - 30 > 64 and 100 > 30 x 1.5 (a dry run: nothing is inserted).
  f.views[0].inflight_requests = 100;
  f.views[1].inflight_requests = 40;
  f.views[2].inflight_requests = 30;
  RouteDecision d = f.policy->route(req, f.views, f.index, {});
  EXPECT_EQ(d.replica, 2U);
  EXPECT_EQ(d.reason, RouteReason::kLeastLoad);
  // Balanced by the absolute rule (100 - 40 <= 64): the tree decides again.
  f.views[2].inflight_requests = 40;
  d = f.policy->route(req, f.views, f.index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  // Balanced by the relative rule: 300 - 210 > 64 but 300 <= 210 x 1.5.
  f.views[0].inflight_requests = 300;
  f.views[1].inflight_requests = f.views[2].inflight_requests = 210;
  EXPECT_EQ(f.policy->route(req, f.views, f.index, {}).replica, 0U);
}

TEST(SglangCacheAwareTest, ThePromptIsInsertedIntoTheTreeOfWhicheverReplicaTookIt) {
  SglangFleet f(3);
  const auto h = prompt_hashes(1, 10);
  f.send(h);  // replica 0
  f.views[0].inflight_requests = 100;
  EXPECT_EQ(f.send(h).replica, 1U);  // imbalanced: shortest queue, and 1 now holds h too
  f.views[0].inflight_requests = 0;
  f.views[1].inflight_requests = 0;
  // Both trees match the whole prompt; the tie goes to the one with fewer in flight.
  f.views[0].inflight_requests = 5;
  EXPECT_EQ(f.send(h).replica, 1U);
}

TEST(SglangCacheAwareTest, EnginesEventsDoNotChangeItsChoice) {
  SglangFleet f(3);
  const auto h = prompt_hashes(1, 10);
  // Replica 2 holds the whole prompt by its events; SGLang's router does not read them.
  for (std::uint64_t hash : h) f.index.apply_stored(2, hash);
  const RouteDecision d = f.send(h);
  EXPECT_EQ(d.replica, 0U);
  // Its prediction is still reported from the gateway's index, like every policy's.
  EXPECT_EQ(d.predicted_cached_tokens, 0U);
  const RouteRequest req = request_for(h);
  EXPECT_EQ(f.policy->route(req, f.views, f.index, {}).replica, 0U);
}

TEST(SglangCacheAwareTest, ADryRunInsertsNothing) {
  SglangFleet f(2);
  const auto h = prompt_hashes(1, 10);
  const RouteRequest req = request_for(h);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.policy->route(req, f.views, f.index, {}).reason, RouteReason::kLeastCost);
  }
}

TEST(SglangCacheAwareTest, TheTreeForgetsItsLeastRecentlyRoutedBlocksPastItsBound) {
  SglangFleet f(2, {.max_tree_blocks = 12});
  const auto a = prompt_hashes(1, 10);
  EXPECT_EQ(f.send(a).replica, 0U);
  EXPECT_EQ(f.send(prompt_hashes(2, 11)).replica, 1U);
  // Replica 0 takes a third prefix (its tree is smaller), which pushes `a` past the bound: the
  // least recently routed blocks go first.
  EXPECT_EQ(f.send(prompt_hashes(3, 12)).replica, 0U);
  const RouteDecision d = f.policy->route(request_for(a), f.views, f.index, {});
  EXPECT_EQ(d.reason, RouteReason::kLeastCost) << "a's blocks should be gone from the tree";
}

TEST(SglangCacheAwareTest, NeverChoosesAnUnhealthyReplica) {
  SglangFleet f(3);
  const auto h = prompt_hashes(1, 10);
  EXPECT_EQ(f.send(h).replica, 0U);
  f.views[0].healthy = false;
  EXPECT_NE(f.send(h).replica, 0U);
  f.views[1].inflight_requests = 100;  // imbalance among the healthy ones
  EXPECT_EQ(f.send(h).replica, 2U);
  for (auto& v : f.views) v.healthy = false;
  EXPECT_EQ(f.policy->route(request_for(h), f.views, f.index, {}).reason,
            RouteReason::kNoHealthyReplica);
}

}  // namespace
}  // namespace prefixgate::gateway
