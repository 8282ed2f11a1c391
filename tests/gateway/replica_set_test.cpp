// ReplicaSet's decisions with replicas excluded (a retry's: the replicas that already failed the
// request). The set hides them from the policy for that one decision, in its own views, so these
// check that they are passed over, that they are shown again after it however it ends, and that
// the count of healthy replicas the set keeps follows health checks and ejections.
#include "server/replica_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/engine_block_keys.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway::server {
namespace {

using gateway::testing::prompt_hashes;
using gateway::testing::request_for;

// `replicas` upstreams under cache_aware, every one healthy and following its events, ejected
// after 2 failures.
std::unique_ptr<ReplicaSet> healthy_set(std::size_t replicas) {
  std::vector<UpstreamConfig> upstreams(replicas);
  for (std::size_t r = 0; r < replicas; ++r) {
    upstreams[r].url = "http://127.0.0.1:" + std::to_string(9200 + r);
  }
  auto set = std::make_unique<ReplicaSet>(std::move(upstreams),
                                          std::move(*make_policy("cache_aware")), IndexConfig{}, 2);
  for (ReplicaId r = 0; r < replicas; ++r) {
    set->health_check_result(r, true);
    set->set_events_link(r, true);
  }
  return set;
}

void hold(ReplicaSet& set, ReplicaId replica, const std::vector<std::uint64_t>& hashes) {
  std::vector<KeyChange> held;
  for (std::uint64_t h : hashes) held.push_back({h, KeyState::kPrimary});
  set.apply_key_changes(replica, held);
}

std::size_t healthy_in_status(const ReplicaSet& set) {
  std::size_t n = 0;
  for (const ReplicaStatus& s : set.status()) n += s.view.healthy ? 1 : 0;
  return n;
}

TEST(ReplicaSetTest, AnExcludedHolderIsPassedOverForThatDecisionOnly) {
  const std::unique_ptr<ReplicaSet> owned = healthy_set(3);
  ReplicaSet& set = *owned;
  const std::vector<std::uint64_t> hashes = prompt_hashes(1, 12);
  hold(set, 1, hashes);
  const RouteRequest request = request_for(hashes);

  const ReplicaId excluded[] = {1};
  const RouteDecision retry = set.route(request, excluded, Clock::now(), /*dry_run=*/true);
  ASSERT_NE(retry.reason, RouteReason::kNoHealthyReplica);
  EXPECT_NE(retry.replica, 1u);

  // Shown again: the next decision finds the holder, and the status calls it healthy.
  const RouteDecision next = set.route(request, {}, Clock::now(), /*dry_run=*/true);
  EXPECT_EQ(next.replica, 1u);
  EXPECT_EQ(next.reason, RouteReason::kCacheHit);
  EXPECT_EQ(healthy_in_status(set), 3u);
}

TEST(ReplicaSetTest, ExcludingEveryHealthyReplicaFindsNoneAndHidesNothingAfter) {
  const std::unique_ptr<ReplicaSet> owned = healthy_set(3);
  ReplicaSet& set = *owned;
  const std::vector<std::uint64_t> hashes = prompt_hashes(2, 4);
  const RouteRequest request = request_for(hashes);

  // Repeated and unknown ids are allowed: each replica is hidden once, an unknown id not at all.
  const ReplicaId all[] = {2, 0, 2, 1, 7};
  EXPECT_EQ(set.route(request, all, Clock::now()).reason, RouteReason::kNoHealthyReplica);
  const ReplicaId two_of_three[] = {0, 0, 2, 9};
  const RouteDecision d = set.route(request, two_of_three, Clock::now(), /*dry_run=*/true);
  ASSERT_NE(d.reason, RouteReason::kNoHealthyReplica);
  EXPECT_EQ(d.replica, 1u);
  EXPECT_EQ(healthy_in_status(set), 3u);
  EXPECT_NE(set.route(request, {}, Clock::now()).reason, RouteReason::kNoHealthyReplica);
}

TEST(ReplicaSetTest, TheHealthyCountFollowsHealthChecksAndEjections) {
  const std::unique_ptr<ReplicaSet> owned = healthy_set(3);
  ReplicaSet& set = *owned;
  const std::vector<std::uint64_t> hashes = prompt_hashes(3, 4);
  const RouteRequest request = request_for(hashes);

  set.health_check_result(0, false);
  set.health_check_result(0, false);  // a second failed check changes nothing
  set.record_failure(2);
  set.record_failure(2);  // ejected: the second failure in a row
  EXPECT_EQ(healthy_in_status(set), 1u);
  // Excluding the one replica left finds none; an unhealthy one excluded counts for nothing.
  const ReplicaId last[] = {1};
  EXPECT_EQ(set.route(request, last, Clock::now()).reason, RouteReason::kNoHealthyReplica);
  const ReplicaId unhealthy[] = {0, 2};
  const RouteDecision d = set.route(request, unhealthy, Clock::now(), /*dry_run=*/true);
  ASSERT_NE(d.reason, RouteReason::kNoHealthyReplica);
  EXPECT_EQ(d.replica, 1u);

  set.health_check_result(0, true);
  set.health_check_result(2, true);
  set.health_check_result(2, true);  // already healthy: still counted once
  EXPECT_EQ(healthy_in_status(set), 3u);
  const RouteDecision again = set.route(request, last, Clock::now(), /*dry_run=*/true);
  ASSERT_NE(again.reason, RouteReason::kNoHealthyReplica);
  EXPECT_NE(again.replica, 1u);
  set.health_check_result(0, false);
  set.health_check_result(1, false);
  set.health_check_result(2, false);
  EXPECT_EQ(set.route(request, {}, Clock::now()).reason, RouteReason::kNoHealthyReplica);
}

}  // namespace
}  // namespace prefixgate::gateway::server
