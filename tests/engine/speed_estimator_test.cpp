#include "prefixgate/engine/speed_estimator.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace prefixgate::engine {
namespace {

// Steps drawn like a serving engine's: decode batches of varying size, prefill chunks mixed in.
void feed(SpeedEstimator& est, double prefill_s, double decode_s, double overhead_s, int steps,
          double noise, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> decodes(0, 48);
  std::uniform_int_distribution<int> chunk(0, 3);
  std::normal_distribution<double> jitter(1.0, noise);
  for (int i = 0; i < steps; ++i) {
    const std::size_t d = static_cast<std::size_t>(decodes(rng));
    const std::size_t p = chunk(rng) == 0 ? 512 * static_cast<std::size_t>(1 + chunk(rng)) : 0;
    if (p == 0 && d == 0) continue;
    const double t = (overhead_s + prefill_s * p + decode_s * d) * jitter(rng);
    est.add_step(p, d, t);
  }
}

TEST(SpeedEstimatorTest, RecoversPrefillAndDecodeRatesFromMixedSteps) {
  SpeedEstimator est;
  feed(est, 50e-6, 200e-6, 2e-3, 2000, 0.05, 1);
  auto s = est.estimate();
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->prefill_seconds_per_token, 50e-6, 5e-6);
  EXPECT_NEAR(s->decode_seconds_per_sequence, 200e-6, 40e-6);
}

TEST(SpeedEstimatorTest, NothingUntilBothKindsOfWorkWereSeen) {
  SpeedEstimator est;
  EXPECT_FALSE(est.estimate());
  for (int i = 1; i <= 100; ++i) est.add_step(0, static_cast<std::size_t>(i % 32 + 1), 1e-3 * i);
  EXPECT_FALSE(est.estimate()) << "decode steps alone cannot give a prefill rate";
  for (int i = 0; i < 3; ++i) est.add_step(1024, 0, 0.05);
  EXPECT_FALSE(est.estimate()) << "too few prefill steps yet";
}

TEST(SpeedEstimatorTest, WorkAlwaysInTheSameProportionCannotBeSeparated) {
  SpeedEstimator est;
  for (int i = 1; i <= 200; ++i) {
    est.add_step(static_cast<std::size_t>(100 * i), static_cast<std::size_t>(i), 1e-4 * i);
  }
  EXPECT_FALSE(est.estimate());
}

TEST(SpeedEstimatorTest, FollowsAHostThatSlowsDown) {
  SpeedEstimator est;
  feed(est, 20e-6, 100e-6, 1e-3, 2000, 0.02, 2);
  feed(est, 80e-6, 400e-6, 1e-3, 3000, 0.02, 3);  // four times slower
  auto s = est.estimate();
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->prefill_seconds_per_token, 80e-6, 8e-6);
}

TEST(SpeedEstimatorTest, DecodeCostBelowTheNoiseIsFlooredAtThePrefillRate) {
  SpeedEstimator est;
  feed(est, 50e-6, 0.0, 5e-3, 2000, 0.05, 5);  // decode batch size does not change a step
  auto s = est.estimate();
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->prefill_seconds_per_token, 50e-6, 5e-6);
  EXPECT_GE(s->decode_seconds_per_sequence, s->prefill_seconds_per_token);
}

TEST(SpeedEstimatorTest, IgnoresEmptyAndInvalidSteps) {
  SpeedEstimator est;
  feed(est, 50e-6, 200e-6, 2e-3, 1000, 0.0, 4);
  est.add_step(0, 0, 5.0);
  est.add_step(512, 4, -1.0);
  est.add_step(512, 4, std::numeric_limits<double>::infinity());
  est.add_step(512, 4, std::numeric_limits<double>::quiet_NaN());
  auto s = est.estimate();
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->prefill_seconds_per_token, 50e-6, 1e-9);
  EXPECT_NEAR(s->decode_seconds_per_sequence, 200e-6, 1e-8);
}

}  // namespace
}  // namespace prefixgate::engine
