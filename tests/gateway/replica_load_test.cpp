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
  apply_load_report(view,
                    {.running = 2,
                     .waiting = 1,
                     .kv_pages_used = 10,
                     .kv_pages_total = 20,
                     .tokens_queued_for_prefill = 40},
                    {});
  EXPECT_EQ(view.running, 2U);
  EXPECT_EQ(view.waiting, 1U);
  EXPECT_EQ(view.kv_pages_used, 10U);
  EXPECT_EQ(view.kv_pages_total, 20U);
  EXPECT_EQ(view.tokens_queued_for_prefill, 40U);
  EXPECT_EQ(view.inflight_requests, 3U);
  EXPECT_EQ(view.inflight_prompt_tokens, 500U);
}

// A replica that announces its speed computes what the gateway sent it in order, at
// prefill_seconds_per_token: what is left drains with time, never below what finishes early.
TEST(ReplicaLoadTest, TheGatewaysOwnPrefillDrainsAtTheReplicasRateInOrder) {
  PrefixIndex index;
  index.add_replica({});
  RecordingPolicy policy;
  ReplicaView view;
  view.prefill_seconds_per_token = 0.001;  // 1,000 tokens a second
  const Clock::time_point t0{};
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  const auto h = prompt_hashes(1, 10);
  const RouteRequest req = request_for(h);  // 160 tokens, none cached
  const RouteDecision d{.replica = 0, .reason = RouteReason::kLeastCost};
  record_routed(index, policy, view, req, d, t0);
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0), 160.0);
  record_routed(index, policy, view, req, d, t0 + ms(40));  // behind the first: done at 320 ms
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(40)), 280.0);
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(200)), 120.0);
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(400)), 0.0) << "late: never negative";
  // Both done at 250 ms, sooner than predicted: nothing left, and the next one starts at once.
  record_prefilled(index, view, req, 160, t0 + ms(150));
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(150)), 160.0);
  record_prefilled(index, view, req, 160, t0 + ms(250));
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(250)), 0.0);
  record_routed(index, policy, view, req, d, t0 + ms(260));
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(view, t0 + ms(300)), 120.0);
  // A replica that announces no speed: the in-flight count as it stands.
  ReplicaView silent;
  record_routed(index, policy, silent, req, d, t0);
  EXPECT_DOUBLE_EQ(own_prefill_left_tokens(silent, t0 + ms(10'000)), 160.0);
}

// A report says how much was queued when the engine wrote it: what it shows beyond the
// gateway's own prefill left at its arrival is the other traffic's (or prefill done on the way).
TEST(ReplicaLoadTest, ALoadReportKeepsWhatItShowsBeyondTheGatewaysOwnPrefill) {
  PrefixIndex index;
  index.add_replica({});
  RecordingPolicy policy;
  ReplicaView view;
  view.prefill_seconds_per_token = 0.001;
  const Clock::time_point t0{};
  const auto h = prompt_hashes(1, 10);
  record_routed(index, policy, view, request_for(h), {.replica = 0}, t0);  // 160 tokens
  const Clock::time_point t = t0 + std::chrono::milliseconds(60);          // 100 of them left
  apply_load_report(view, {.tokens_queued_for_prefill = 400}, t);
  EXPECT_EQ(view.report_at, t);
  EXPECT_EQ(view.report_beyond_own_tokens, 300U);
  apply_load_report(view, {.tokens_queued_for_prefill = 50}, t);
  EXPECT_EQ(view.report_beyond_own_tokens, 0U) << "a report under the own count adds nothing";
}

}  // namespace
}  // namespace prefixgate::gateway
