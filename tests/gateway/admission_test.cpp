// AdmissionCore in virtual time: each tenant limit rejects with the wait its bucket reports and
// charges nothing, tokens settle to the usage, the gateway-wide bound queues and hands slots
// round robin across tenants (a tenant sending ten times more does not starve another), a full
// queue drops from the longest, and giving up refunds.
#include "prefixgate/gateway/admission.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>

namespace prefixgate::gateway {
namespace {

using Clock = AdmissionCore::Clock;
using Outcome = Arrival::Outcome;
using std::chrono::seconds;

const Clock::time_point t0{};

AdmissionConfig limits(std::map<std::string, TenantLimits> tenants, std::size_t max_inflight = 0,
                       std::size_t max_queue = 1024) {
  AdmissionConfig c;
  c.tenant_limits = std::move(tenants);
  c.max_inflight = max_inflight;
  c.max_queue = max_queue;
  return c;
}

TEST(AdmissionTest, RequestsPerMinuteRejectsTheNextWithItsWait) {
  AdmissionCore core(limits({{"default", {.requests_per_minute = 3}}}));
  for (FairQueue::Id id = 1; id <= 3; ++id) {
    EXPECT_EQ(core.arrive(id, "a", 10, t0).outcome, Outcome::kAdmitted);
  }
  const Arrival a = core.arrive(4, "a", 10, t0);
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_EQ(a.limit, Limit::kRequestsPerMinute);
  EXPECT_EQ(a.limit_value, 3U);
  EXPECT_EQ(a.retry_after, seconds(20));  // one request per 20 s
  // Another tenant has buckets of its own from the default.
  EXPECT_EQ(core.arrive(5, "b", 10, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(6, "a", 10, t0 + seconds(20)).outcome, Outcome::kAdmitted);
}

TEST(AdmissionTest, ATenantWithoutEntryOrDefaultIsUnlimited) {
  AdmissionCore core(limits({{"team-a", {.requests_per_minute = 1}}}));
  for (FairQueue::Id id = 1; id <= 100; ++id) {
    ASSERT_EQ(core.arrive(id, "other", 1000000, t0).outcome, Outcome::kAdmitted);
  }
  EXPECT_EQ(core.arrive(101, "team-a", 1, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(102, "team-a", 1, t0).outcome, Outcome::kRejected);
}

TEST(AdmissionTest, TokensPerMinuteRejectsByEstimateAndSettlesToUsage) {
  AdmissionCore core(limits({{"default", {.tokens_per_minute = 600}}}));  // 10 a second
  EXPECT_EQ(core.arrive(1, "a", 500, t0).outcome, Outcome::kAdmitted);
  Arrival a = core.arrive(2, "a", 200, t0);  // 100 left
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_EQ(a.limit, Limit::kTokensPerMinute);
  EXPECT_EQ(a.retry_after, seconds(10));
  // Request 1 used 50 of its 500: 450 come back, and 200 now fit.
  EXPECT_TRUE(core.finish(1, 50, t0).empty());
  EXPECT_EQ(core.arrive(3, "a", 200, t0).outcome, Outcome::kAdmitted);  // 350 left
  // Request 3 used 750: 550 more are taken, 200 in debt.
  core.finish(3, 750, t0);
  a = core.arrive(4, "a", 1, t0);
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_EQ(a.retry_after, std::chrono::milliseconds(20100));
  // Unknown usage: the estimate stands (a minute refilled the debt to 400; 100 charged).
  EXPECT_EQ(core.arrive(5, "a", 100, t0 + seconds(60)).outcome, Outcome::kAdmitted);
  core.finish(5, std::nullopt, t0 + seconds(60));
  EXPECT_DOUBLE_EQ(core.tenants().at("a").tokens->available(t0 + seconds(60)), 300);
  // More than the whole bucket can never pass.
  a = core.arrive(6, "a", 601, t0 + seconds(600));
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_EQ(a.retry_after, Clock::duration::max());
}

TEST(AdmissionTest, ARejectedRequestIsChargedNothing) {
  AdmissionCore core(limits({{"default", {.requests_per_minute = 2, .tokens_per_minute = 100}}}));
  EXPECT_EQ(core.arrive(1, "a", 90, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(2, "a", 90, t0).limit, Limit::kTokensPerMinute);  // 1 request left
  EXPECT_EQ(core.arrive(3, "a", 10, t0).outcome, Outcome::kAdmitted);
}

TEST(AdmissionTest, MaxConcurrentCountsOpenRequests) {
  AdmissionCore core(limits({{"default", {.max_concurrent = 2}}}));
  EXPECT_EQ(core.arrive(1, "a", 1, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(2, "a", 1, t0).outcome, Outcome::kAdmitted);
  const Arrival a = core.arrive(3, "a", 1, t0);
  EXPECT_EQ(a.limit, Limit::kMaxConcurrent);
  EXPECT_EQ(a.retry_after, seconds(1));
  core.finish(1, 1, t0);
  EXPECT_EQ(core.arrive(4, "a", 1, t0).outcome, Outcome::kAdmitted);
}

TEST(AdmissionTest, BoundQueuesAndHandsFreedSlotsOn) {
  AdmissionCore core(limits({}, /*max_inflight=*/1));
  EXPECT_EQ(core.arrive(1, "a", 1, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(2, "a", 1, t0).outcome, Outcome::kQueued);
  EXPECT_EQ(core.arrive(3, "b", 1, t0).outcome, Outcome::kQueued);
  EXPECT_EQ(core.inflight(), 1U);
  EXPECT_EQ(core.queued(), 2U);
  EXPECT_EQ(core.finish(1, 1, t0), (std::vector<FairQueue::Id>{2}));
  EXPECT_EQ(core.finish(2, 1, t0), (std::vector<FairQueue::Id>{3}));
  EXPECT_TRUE(core.finish(3, 1, t0).empty());
  EXPECT_EQ(core.inflight(), 0U);
}

// Under the bound, "heavy" sends ten requests for each one of "light", all at once; every freed
// slot goes to the next tenant in turn, so light's requests are all admitted within the first
// 2 x 10 slots, not behind heavy's hundred.
TEST(AdmissionTest, ATenantSendingTenTimesMoreDoesNotStarveAnother) {
  AdmissionCore core(limits({}, /*max_inflight=*/4));
  FairQueue::Id next = 1;
  std::map<FairQueue::Id, std::string> tenant_of;
  std::deque<FairQueue::Id> running;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 10; ++i) {
      tenant_of[next] = "heavy";
      if (core.arrive(next, "heavy", 1, t0).outcome == Outcome::kAdmitted) running.push_back(next);
      ++next;
    }
    tenant_of[next] = "light";
    if (core.arrive(next, "light", 1, t0).outcome == Outcome::kAdmitted) running.push_back(next);
    ++next;
  }
  ASSERT_EQ(running.size(), 4U);  // heavy's first four took the free slots
  std::vector<std::string> order;
  while (!running.empty()) {
    const FairQueue::Id done = running.front();
    running.pop_front();
    for (FairQueue::Id id : core.finish(done, 1, t0)) {
      order.push_back(tenant_of[id]);
      running.push_back(id);
    }
  }
  ASSERT_EQ(order.size(), 110U - 4U);
  // Alternating while both wait: light's ten are among the first twenty slots handed out.
  const auto light_in_first_20 = std::count(order.begin(), order.begin() + 20, "light");
  EXPECT_EQ(light_in_first_20, 10);
  for (std::size_t i = 0; i + 1 < 20; i += 2) {
    EXPECT_NE(order[i], order[i + 1]) << "slots " << i << " and " << i + 1;
  }
}

TEST(AdmissionTest, AFullQueueDropsTheLongestTenantsNewestForAShorterOne) {
  AdmissionCore core(limits({}, /*max_inflight=*/1, /*max_queue=*/3));
  EXPECT_EQ(core.arrive(1, "heavy", 1, t0).outcome, Outcome::kAdmitted);
  for (FairQueue::Id id = 2; id <= 4; ++id) {
    EXPECT_EQ(core.arrive(id, "heavy", 1, t0).outcome, Outcome::kQueued);
  }
  // heavy holds all three places: its newest (4) makes room for light.
  Arrival a = core.arrive(5, "light", 1, t0);
  EXPECT_EQ(a.outcome, Outcome::kQueued);
  ASSERT_TRUE(a.dropped);
  EXPECT_EQ(*a.dropped, 4U);
  // heavy now holds 2, light 1: not two more than light would hold, so light is refused.
  a = core.arrive(6, "light", 1, t0);
  EXPECT_EQ(a.outcome, Outcome::kRejected);
  EXPECT_EQ(a.limit, Limit::kQueueFull);
  EXPECT_FALSE(a.dropped);
  // And heavy, holding the most, is refused too.
  EXPECT_EQ(core.arrive(7, "heavy", 1, t0).limit, Limit::kQueueFull);
  EXPECT_EQ(core.queued(), 3U);
}

TEST(AdmissionTest, LeavingTheQueueRefundsAndLosesNoSlot) {
  AdmissionCore core(limits({{"default", {.requests_per_minute = 3}}}, /*max_inflight=*/1));
  EXPECT_EQ(core.arrive(1, "a", 1, t0).outcome, Outcome::kAdmitted);
  EXPECT_EQ(core.arrive(2, "a", 1, t0).outcome, Outcome::kQueued);
  EXPECT_EQ(core.arrive(3, "a", 1, t0).outcome, Outcome::kQueued);
  EXPECT_TRUE(core.leave(2, t0));  // timed out, or its client left
  EXPECT_FALSE(core.leave(2, t0));
  EXPECT_FALSE(core.leave(1, t0));                                  // admitted: finish() it instead
  EXPECT_EQ(core.arrive(4, "a", 1, t0).outcome, Outcome::kQueued);  // 2's request came back
  EXPECT_EQ(core.finish(1, 1, t0), (std::vector<FairQueue::Id>{3}));
  EXPECT_EQ(core.finish(3, 1, t0), (std::vector<FairQueue::Id>{4}));
  EXPECT_TRUE(core.finish(4, 1, t0).empty());
  EXPECT_EQ(core.inflight(), 0U);
  EXPECT_EQ(core.queued(), 0U);
}

TEST(AdmissionTest, IdleTenantsWithFullBucketsAreForgotten) {
  AdmissionCore core(limits({{"default", {.requests_per_minute = 1000}}}));
  for (FairQueue::Id id = 1; id <= 2048; ++id) {
    const std::string tenant = "t" + std::to_string(id);
    ASSERT_EQ(core.arrive(id, tenant, 1, t0).outcome, Outcome::kAdmitted);
    core.finish(id, 1, t0);
  }
  // Every 1024 arrivals, those whose buckets have refilled go; here none yet (same instant).
  EXPECT_GE(core.tenants().size(), 1024U);
  for (FairQueue::Id id = 2049; id <= 3072; ++id) {  // 10 a second, within its 1000 a minute
    const Clock::time_point now = t0 + seconds(120) + std::chrono::milliseconds(100 * (id - 2049));
    ASSERT_EQ(core.arrive(id, "late", 1, now).outcome, Outcome::kAdmitted);
    core.finish(id, 1, now);
  }
  EXPECT_LE(core.tenants().size(), 2U);
}

}  // namespace
}  // namespace prefixgate::gateway
