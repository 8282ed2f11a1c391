// RateLimiter, the log sampler of the request path: at most N events per one-second window,
// the window starting at the first event after the last one ended; once a window's budget is
// spent it answers no without its lock until the window ends, and yes again after.
#include <gtest/gtest.h>

#include "server/context.h"

namespace prefixgate::gateway::server {
namespace {

using namespace std::chrono_literals;
const RateLimiter::Clock::time_point kStart = RateLimiter::Clock::time_point(1000s);

TEST(RateLimiterTest, LetsThroughTheBudgetOfEachWindow) {
  RateLimiter limiter(2);
  EXPECT_TRUE(limiter.allow(kStart));
  EXPECT_TRUE(limiter.allow(kStart + 1ms));
  EXPECT_FALSE(limiter.allow(kStart + 2ms));  // spent: the window ends at kStart + 1 s
  EXPECT_FALSE(limiter.allow(kStart + 999ms));
  EXPECT_FALSE(limiter.allow(kStart + 1s - 1ns));
  EXPECT_TRUE(limiter.allow(kStart + 1s));  // a new window, from here
  EXPECT_TRUE(limiter.allow(kStart + 1500ms));
  EXPECT_FALSE(limiter.allow(kStart + 1600ms));
  EXPECT_FALSE(limiter.allow(kStart + 2s - 1ns));
  EXPECT_TRUE(limiter.allow(kStart + 2s));
  // A window that starts late ends one second after its first event, not on the second.
  EXPECT_TRUE(limiter.allow(kStart + 5500ms));
  EXPECT_TRUE(limiter.allow(kStart + 5600ms));
  EXPECT_FALSE(limiter.allow(kStart + 6s));
  EXPECT_FALSE(limiter.allow(kStart + 6500ms - 1ns));
  EXPECT_TRUE(limiter.allow(kStart + 6500ms));
}

TEST(RateLimiterTest, ZeroLetsNothingThroughAndRaisingTheRateTakesEffect) {
  RateLimiter limiter;
  EXPECT_FALSE(limiter.allow(kStart));
  EXPECT_FALSE(limiter.allow(kStart + 10s));
  limiter.set_rate(1);
  EXPECT_TRUE(limiter.allow(kStart + 12s));
  EXPECT_FALSE(limiter.allow(kStart + 12500ms));
}

}  // namespace
}  // namespace prefixgate::gateway::server
