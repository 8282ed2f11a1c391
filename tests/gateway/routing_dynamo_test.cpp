// dynamo_kv: Dynamo KV router's documented cost, one property per test.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;
using testing::request_for;

struct DynamoFleet {
  explicit DynamoFleet(std::size_t n, PolicyConfig config = {}) {
    auto p = make_policy("dynamo_kv", config);
    EXPECT_TRUE(p.ok());
    policy = std::move(*p);
    views.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      views[r].id = static_cast<ReplicaId>(r);
      index.add_replica({});
    }
  }
  RouteDecision route(const std::vector<std::uint64_t>& hashes) {
    return policy->route(request_for(hashes), views, index, {});
  }
  // Routes and records the request, as the gateway does when it sends one.
  RouteDecision send(const std::vector<std::uint64_t>& hashes) {
    const RouteRequest req = request_for(hashes);
    const RouteDecision d = policy->route(req, views, index, {});
    EXPECT_NE(d.reason, RouteReason::kNoHealthyReplica);
    record_routed(index, *policy, views[d.replica], req, d, {});
    return d;
  }
  // Puts a running request of `blocks` unrelated blocks on `replica`, as if it had been routed
  // there (its prefill already done).
  RouteDecision occupy(ReplicaId replica, std::uint64_t id, std::size_t blocks) {
    held.push_back(prompt_hashes(1000 + id, blocks));
    const RouteRequest req = request_for(held.back());
    RouteDecision d{.replica = replica, .reason = RouteReason::kLeastCost, .ticket = 1000 + id};
    policy->on_routed(req, d, {});
    return d;
  }
  void store(ReplicaId r, const std::vector<std::uint64_t>& hashes, std::size_t blocks) {
    for (std::size_t i = 0; i < blocks; ++i) index.apply_stored(r, hashes[i]);
  }
  std::unique_ptr<RoutingPolicy> policy;
  PrefixIndex index;
  std::vector<ReplicaView> views;
  std::vector<std::vector<std::uint64_t>> held;
};

TEST(DynamoKvTest, RefusesOutOfRangeParameters) {
  PolicyConfig bad;
  bad.dynamo.overlap_score_weight = -1;
  auto refused = make_policy("dynamo_kv", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().param, "routing.dynamo_kv.overlap_score_weight");
  bad = {};
  bad.dynamo.temperature = -0.5;
  EXPECT_FALSE(make_policy("dynamo_kv", bad).ok());
  auto ok = make_policy("dynamo_kv");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->name(), "dynamo_kv");
}

// Dynamo's worked example (kv_cache_routing.md): cached 2 / 5 / 8 of a 10-block prompt, so 8 / 5
// / 2 blocks to prefill, and 10 / 5 / 9 blocks already decoding. With the prompt's own 10 new
// blocks: 8 + 20 = 28, 5 + 15 = 20, 2 + 19 = 21. The middle worker wins, not the best match.
TEST(DynamoKvTest, TheLowestPrefillPlusDecodeBlocksWins) {
  DynamoFleet f(3);
  const auto h = prompt_hashes(1, 10);
  f.store(0, h, 2);
  f.store(1, h, 5);
  f.store(2, h, 8);
  f.occupy(0, 1, 10);
  f.occupy(1, 2, 5);
  f.occupy(2, 3, 9);
  const RouteDecision d = f.route(h);
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_EQ(d.predicted_cached_tokens, 5U * 16);
  // Without the decode load the best match wins.
  DynamoFleet g(3);
  g.store(0, h, 2);
  g.store(1, h, 5);
  g.store(2, h, 8);
  EXPECT_EQ(g.route(h).replica, 2U);
}

TEST(DynamoKvTest, QueuedPrefillCountsAsPrefillBlocks) {
  DynamoFleet f(2);
  const auto h = prompt_hashes(1, 10);
  f.store(0, h, 10);
  EXPECT_EQ(f.route(h).replica, 0U);
  // 320 tokens (20 blocks) sent to replica 0 and not yet prefilled outweigh its 10 cached
  // blocks: 20 + 0 + 10 > 0 + 10 + 10.
  f.views[0].inflight_prompt_tokens = 320;
  EXPECT_EQ(f.route(h).replica, 1U);
  f.views[0].inflight_prompt_tokens = 100;  // 6.25 + 10 < 10 + 10
  EXPECT_EQ(f.route(h).replica, 0U);
}

TEST(DynamoKvTest, OverlapComesFromEventsNotFromPredictions) {
  DynamoFleet f(2);
  const auto h = prompt_hashes(1, 10);
  f.occupy(0, 1, 3);  // replica 0 a little busier
  f.index.predict(0, h, {});
  EXPECT_EQ(f.route(h).replica, 1U) << "a prediction is not an overlap";
  f.store(0, h, 10);
  EXPECT_EQ(f.route(h).replica, 0U);
}

TEST(DynamoKvTest, ActiveBlocksAreAddedWhenRoutedAndFreedWhenFinished) {
  DynamoFleet f(2);
  const auto a = prompt_hashes(1, 10);
  const RouteDecision first = f.send(a);
  EXPECT_NE(first.ticket, 0U);
  // Replica `first` now decodes 10 blocks: a new unrelated prompt goes to the other.
  const RouteDecision second = f.route(prompt_hashes(2, 10));
  EXPECT_NE(second.replica, first.replica);
  record_finished(f.index, *f.policy, f.views[first.replica], request_for(a), first, false,
                  uncached_prompt_tokens(request_for(a), first), {});
  // Freed: both cost the same again, and ties are broken at random: both get picked.
  std::map<ReplicaId, int> picks;
  for (int i = 0; i < 40; ++i) ++picks[f.route(prompt_hashes(2, 10)).replica];
  EXPECT_EQ(picks.size(), 2U);
}

TEST(DynamoKvTest, APrefixAlreadyRunningOnAReplicaAddsNoDecodeBlocks) {
  DynamoFleet f(2);
  const auto a = prompt_hashes(7, 8, /*tail_id=*/1, 2);
  const auto b = prompt_hashes(7, 8, /*tail_id=*/2, 2);
  f.occupy(1, 1, 5);  // 5 blocks running on replica 1
  const RouteDecision d = f.send(a);
  ASSERT_EQ(d.replica, 0U);               // 10 prefill + 0 + 10 new < 10 + 5 + 10
  f.views[0].inflight_prompt_tokens = 0;  // a's first token came
  // b shares a's 8 running blocks on replica 0: 10 + (10 + 2 new) = 22 there against 25 on
  // replica 1. Counting b's 10 blocks as new would make it 30.
  EXPECT_EQ(f.route(b).replica, 0U);
}

TEST(DynamoKvTest, WeightZeroIgnoresTheCache) {
  PolicyConfig config;
  config.dynamo.overlap_score_weight = 0;
  DynamoFleet f(2, config);
  const auto h = prompt_hashes(1, 10);
  f.store(0, h, 10);
  f.occupy(0, 1, 1);
  EXPECT_EQ(f.route(h).replica, 1U);
}

TEST(DynamoKvTest, TemperatureSamplesAndFavoursTheCheaper) {
  PolicyConfig config;
  config.dynamo.temperature = 0.5;
  config.seed = 7;
  DynamoFleet f(3, config);
  DynamoFleet g(3, config);
  const auto h = prompt_hashes(1, 10);
  f.store(0, h, 10);
  g.store(0, h, 10);
  std::map<ReplicaId, int> picks;
  for (int i = 0; i < 600; ++i) {
    const ReplicaId r = f.route(h).replica;
    EXPECT_EQ(r, g.route(h).replica) << "the same seed samples the same";
    ++picks[r];
  }
  // Normalized costs 0, 1, 1: weights 1, e^-2, e^-2: replica 0 about 79 %.
  EXPECT_NEAR(picks[0], 600 * 0.787, 45);
  EXPECT_GT(picks[1], 0);
  EXPECT_GT(picks[2], 0);
}

TEST(DynamoKvTest, NeverChoosesAnUnhealthyReplica) {
  DynamoFleet f(3);
  const auto h = prompt_hashes(1, 10);
  f.store(0, h, 10);
  f.views[0].healthy = false;
  for (int i = 0; i < 20; ++i) EXPECT_NE(f.route(h).replica, 0U);
  for (auto& v : f.views) v.healthy = false;
  EXPECT_EQ(f.route(h).reason, RouteReason::kNoHealthyReplica);
}

}  // namespace
}  // namespace prefixgate::gateway
