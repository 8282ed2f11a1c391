// cache_aware's choice among the replicas holding a prompt's longest match when every batch is
// full (gateway/ROUTING.md, "A full fleet: the holder whose place comes soonest").
#include <gtest/gtest.h>

#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;
using testing::request_for;

std::unique_ptr<RoutingPolicy> policy(std::string_view name) {
  return std::move(*make_policy(name));
}

// Three replicas that announce their speed and their batch, each batch full (64 running, none
// sent since the report): no replica would admit at once, so the wait for a place is left out of
// the cost between replicas.
std::vector<ReplicaView> full_fleet() {
  std::vector<ReplicaView> views(3);
  for (std::size_t r = 0; r < views.size(); ++r) {
    ReplicaView& v = views[r];
    v.id = static_cast<ReplicaId>(r);
    v.prefill_seconds_per_token = 3e-5;
    v.decode_seconds_per_sequence = 1e-4;
    v.kv_pages_total = 1000;
    v.batch_slots = 64;
    v.running = 64;
    v.inflight_requests = 64;
    v.admission_interval_seconds = 0.06;
  }
  return views;
}

// A hot prefix held by replicas 0 and 1. Replica 0's batch was filled in a burst by the prefix's
// siblings and ends in one, 2 s away; replica 1 has 200 tokens of prefill queued (6 ms) and its
// next sequence ends in 10 ms. Without the wait replica 0 is the cheaper holder, and the request
// would wait 2 s there for a place. Replica 2, whose place is nearer still, holds nothing: a
// copy there is not what the rule is for, so the hit stays on a holder.
TEST(CacheAwareTest, AFullFleetSendsAHitToTheHolderWhosePlaceComesSoonest) {
  PrefixIndex index;
  for (int r = 0; r < 3; ++r) index.add_replica({});
  const auto h = prompt_hashes(7, 128);  // 2,048 tokens
  for (std::uint64_t b : h) {
    index.apply_stored(0, b);
    index.apply_stored(1, b);
  }
  auto views = full_fleet();
  views[0].next_end_seconds = 2.0;
  views[1].next_end_seconds = 0.01;
  views[1].tokens_queued_for_prefill = 200;
  views[2].next_end_seconds = 0.001;

  RouteDecision d = policy("cache_aware")->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 1U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);
  EXPECT_EQ(d.predicted_cached_tokens, 2048U);
  // The rule before: the least cost with the wait left out, the holder with the shorter queue.
  d = policy("cache_aware:soonest_holder=false")->route(request_for(h), views, index, {});
  EXPECT_EQ(d.replica, 0U);
  EXPECT_EQ(d.reason, RouteReason::kCacheHit);

  // Requests sent to replica 1 since its report queue past its batch, an admission interval
  // each: after 40 of them (2.4 s) replica 0's end, 2 s away, is the sooner place.
  views[1].inflight_requests = 104;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 0U);

  // With a place free somewhere the wait is in every replica's cost already, and the rule does
  // not apply: replica 2 has room, replica 1 keeps the hit as the cheapest holder.
  views[1].inflight_requests = 64;
  views[2].running = 10;
  views[2].inflight_requests = 10;
  EXPECT_EQ(policy("cache_aware")->route(request_for(h), views, index, {}).replica, 1U);
  EXPECT_FALSE(make_policy("cache_aware:soonest_holder=maybe").ok());
}

}  // namespace
}  // namespace prefixgate::gateway
