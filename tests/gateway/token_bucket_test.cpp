// TokenBucket in virtual time: a burst of its capacity, continuous refill, the wait it reports,
// debt from settling and refunds capped at the capacity.
#include "prefixgate/gateway/token_bucket.h"

#include <gtest/gtest.h>

namespace prefixgate::gateway {
namespace {

using Clock = TokenBucket::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(TokenBucketTest, AllowsABurstOfItsCapacityThenRefillsContinuously) {
  const Clock::time_point t0{};
  TokenBucket b(60, std::chrono::minutes(1), t0);  // 1 a second
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(b.wait_for(1, t0), Clock::duration::zero()) << i;
    b.take(1, t0);
  }
  EXPECT_EQ(b.wait_for(1, t0), seconds(1));
  EXPECT_EQ(b.wait_for(1, t0 + milliseconds(400)), milliseconds(600));
  EXPECT_EQ(b.wait_for(1, t0 + seconds(1)), Clock::duration::zero());
  // Refill stops at the capacity however long it waits.
  EXPECT_DOUBLE_EQ(b.available(t0 + std::chrono::hours(1)), 60);
}

TEST(TokenBucketTest, AmountOverTheCapacityNeverFits) {
  const Clock::time_point t0{};
  TokenBucket b(100, std::chrono::minutes(1), t0);
  EXPECT_EQ(b.wait_for(101, t0), Clock::duration::max());
  EXPECT_EQ(b.wait_for(100, t0), Clock::duration::zero());
}

TEST(TokenBucketTest, DebtMustRefillBeforeTheNextTake) {
  const Clock::time_point t0{};
  TokenBucket b(600, std::chrono::minutes(1), t0);  // 10 a second
  b.take(500, t0);                                  // charged an estimate of 500
  b.take(300, t0);                                  // the answer said 800 were used: 200 in debt
  EXPECT_DOUBLE_EQ(b.available(t0), -200);
  EXPECT_EQ(b.wait_for(1, t0), std::chrono::milliseconds(20100));  // (200 + 1) / 10 per second
  EXPECT_GT(b.wait_for(1, t0 + seconds(20)), Clock::duration::zero());
  EXPECT_EQ(b.wait_for(1, t0 + seconds(21)), Clock::duration::zero());
}

TEST(TokenBucketTest, GiveBackIsCappedAtTheCapacity) {
  const Clock::time_point t0{};
  TokenBucket b(10, std::chrono::minutes(1), t0);
  b.take(4, t0);
  b.give_back(100, t0);
  EXPECT_DOUBLE_EQ(b.available(t0), 10);
  EXPECT_TRUE(b.full(t0));
}

TEST(TokenBucketTest, AClockReadBeforeTheLastAddsNothing) {
  const Clock::time_point t0 = Clock::time_point{} + seconds(10);
  TokenBucket b(60, std::chrono::minutes(1), t0);
  b.take(60, t0);
  EXPECT_DOUBLE_EQ(b.available(t0 - seconds(5)), 0);  // another thread's older now()
  EXPECT_DOUBLE_EQ(b.available(t0 + seconds(5)), 5);
}

}  // namespace
}  // namespace prefixgate::gateway
