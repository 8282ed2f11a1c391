#include "prefixgate/gateway/replica_load.h"

#include <gtest/gtest.h>

#include "gateway/fleet_sim.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;
using testing::request_for;

// Counts the lifecycle calls it gets.
class RecordingPolicy final : public RoutingPolicy {
 public:
  std::string_view name() const override { return "recording"; }
  RouteDecision route(const RouteRequest&, std::span<const ReplicaView>, const PrefixIndex&,
                      Clock::time_point) override {
    return {};
  }
  void on_routed(const RouteRequest&, const RouteDecision& d, Clock::time_point) override {
    routed.push_back(d.ticket);
  }
  void on_finished(const RouteDecision& d) override { finished.push_back(d.ticket); }
  std::vector<std::uint64_t> routed, finished;
};

TEST(ReplicaLoadTest, ARoutedRequestIsPredictedAndCountedUntilItEnds) {
  PrefixIndex index;
  index.add_replica({});
  index.add_replica({});
  RecordingPolicy policy;
  ReplicaView view;
  view.id = 1;
  const auto h = prompt_hashes(1, 10);
  const RouteRequest req = request_for(h);  // 160 tokens
  const RouteDecision d{
      .replica = 1, .reason = RouteReason::kCacheHit, .predicted_cached_tokens = 48, .ticket = 9};
  EXPECT_EQ(uncached_prompt_tokens(req, d), 112U);

  record_routed(index, policy, view, req, d, {});
  EXPECT_EQ(view.inflight_requests, 1U);
  EXPECT_EQ(view.inflight_prompt_tokens, 112U);
  std::vector<std::size_t> match(2);
  index.longest_match(h, {}, match);
  EXPECT_EQ(match[1], 10U) << "the prompt is predicted on the chosen replica";
  EXPECT_EQ(match[0], 0U);
  EXPECT_EQ(policy.routed, (std::vector<std::uint64_t>{9}));

  record_prefilled(index, view, req, 112, {});
  EXPECT_EQ(view.inflight_prompt_tokens, 0U);
  EXPECT_EQ(view.inflight_requests, 1U);
  record_finished(index, policy, view, req, d, /*prefilled=*/true, 0, {});
  EXPECT_EQ(view.inflight_requests, 0U);
  EXPECT_EQ(policy.finished, (std::vector<std::uint64_t>{9}));
}

TEST(ReplicaLoadTest, ARequestThatEndsBeforeItsFirstTokenLeavesNoQueuedPrefill) {
  PrefixIndex index;
  index.add_replica({});
  RecordingPolicy policy;
  ReplicaView view;
  const auto h = prompt_hashes(1, 4);
  const RouteRequest req = request_for(h);
  const RouteDecision d{.replica = 0, .reason = RouteReason::kLeastCost};
  record_routed(index, policy, view, req, d, {});
  record_routed(index, policy, view, req, d, {});
  EXPECT_EQ(view.inflight_prompt_tokens, 128U);
  record_finished(index, policy, view, req, d, false, uncached_prompt_tokens(req, d), {});
  EXPECT_EQ(view.inflight_requests, 1U);
  EXPECT_EQ(view.inflight_prompt_tokens, 64U);
  // Counts never go below zero, whatever order the ends come in.
  record_finished(index, policy, view, req, d, false, 1000, {});
  record_finished(index, policy, view, req, d, false, 1000, {});
  EXPECT_EQ(view.inflight_requests, 0U);
  EXPECT_EQ(view.inflight_prompt_tokens, 0U);
}

TEST(ReplicaLoadTest, ALoadReportReplacesTheEngineCountsAndKeepsTheGatewaysOwn) {
  ReplicaView view;
  view.inflight_requests = 3;
  view.inflight_prompt_tokens = 500;
  view.running = 7;
  apply_load_report(view, {.running = 2,
                           .waiting = 1,
                           .kv_pages_used = 10,
                           .kv_pages_total = 20,
                           .tokens_queued_for_prefill = 40});
  EXPECT_EQ(view.running, 2U);
  EXPECT_EQ(view.waiting, 1U);
  EXPECT_EQ(view.kv_pages_used, 10U);
  EXPECT_EQ(view.kv_pages_total, 20U);
  EXPECT_EQ(view.tokens_queued_for_prefill, 40U);
  EXPECT_EQ(view.inflight_requests, 3U);
  EXPECT_EQ(view.inflight_prompt_tokens, 500U);
}

}  // namespace
}  // namespace prefixgate::gateway
