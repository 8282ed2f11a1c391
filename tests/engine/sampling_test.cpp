#include "prefixgate/engine/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

namespace prefixgate::engine {
namespace {

std::vector<float> random_logits(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::size_t argmax(const std::vector<float>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(SamplingTest, TemperatureZeroIsArgmaxWithLowestIdOnTies) {
  const SamplingParams greedy{.temperature = 0.0};
  EXPECT_EQ(sample_token(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}, greedy, 0), 1u);
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}, greedy, 7), 1u);
  EXPECT_EQ(sample_token(std::vector<float>{NAN, -1.0f, NAN}, greedy, 0), 1u);
  const auto logits = random_logits(1000, 1);
  for (std::uint64_t step = 0; step < 5; ++step) {
    EXPECT_EQ(sample_token(logits, greedy, step), argmax(logits));
  }
}

TEST(SamplingTest, SameSeedAndStepGiveTheSameToken) {
  const auto logits = random_logits(500, 2);
  const SamplingParams params{.temperature = 1.0, .seed = 1234};
  std::vector<canon::TokenId> first, second;
  for (std::uint64_t step = 0; step < 64; ++step) {
    first.push_back(sample_token(logits, params, step));
    second.push_back(sample_token(logits, params, step));
  }
  EXPECT_EQ(first, second);
  // Different steps and different seeds draw differently (with 500 flat-ish options, 64 draws
  // that all agree would be a broken RNG).
  SamplingParams other = params;
  other.seed = 1235;
  std::size_t same = 0;
  for (std::uint64_t step = 0; step < 64; ++step) {
    same += sample_token(logits, other, step) == first[step];
  }
  EXPECT_LT(same, 32u);
  EXPECT_GT(std::set<canon::TokenId>(first.begin(), first.end()).size(), 10u);
}

TEST(SamplingTest, TopKOfOneIsGreedy) {
  const auto logits = random_logits(300, 3);
  const SamplingParams params{.temperature = 2.0, .top_k = 1, .seed = 9};
  for (std::uint64_t step = 0; step < 50; ++step) {
    EXPECT_EQ(sample_token(logits, params, step), argmax(logits));
  }
}

TEST(SamplingTest, TinyTopPIsGreedy) {
  const auto logits = random_logits(300, 4);
  const SamplingParams params{.temperature = 1.0, .top_p = 1e-6, .seed = 10};
  for (std::uint64_t step = 0; step < 50; ++step) {
    EXPECT_EQ(sample_token(logits, params, step), argmax(logits));
  }
}

TEST(SamplingTest, TopKKeepsOnlyTheKLargest) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.0f, 3.0f, 2.0f};
  const SamplingParams params{.temperature = 100.0, .top_k = 3, .seed = 11};
  std::set<canon::TokenId> seen;
  for (std::uint64_t step = 0; step < 300; ++step) seen.insert(sample_token(logits, params, step));
  EXPECT_EQ(seen, (std::set<canon::TokenId>{1, 3, 4}));
}

TEST(SamplingTest, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  const SamplingParams params{.temperature = 1.0, .top_p = 0.7, .seed = 12};
  std::vector<int> counts(4);
  for (std::uint64_t step = 0; step < 4000; ++step) ++counts[sample_token(logits, params, step)];
  EXPECT_EQ(counts[2], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.5 / 0.8, 0.03);
}

TEST(SamplingTest, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  constexpr int kDraws = 20000;
  // At temperature 1 the draws follow p; at 0.5 they follow p^2 normalised.
  for (double temperature : {1.0, 0.5}) {
    const SamplingParams params{.temperature = temperature, .seed = 77};
    std::vector<int> counts(3);
    for (std::uint64_t step = 0; step < kDraws; ++step) {
      ++counts[sample_token(logits, params, step)];
    }
    double norm = 0;
    for (float l : logits) norm += std::exp(l / temperature);
    for (std::size_t i = 0; i < 3; ++i) {
      const double want = std::exp(logits[i] / temperature) / norm;
      // 5 standard deviations of a binomial proportion at 20000 draws is below 0.018.
      EXPECT_NEAR(counts[i] / static_cast<double>(kDraws), want, 0.018)
          << "temperature " << temperature << " token " << i;
    }
  }
}

TEST(SamplingTest, NeverDrawsNegativeInfinityOrNan) {
  const std::vector<float> logits = {-INFINITY, 0.0f, NAN, 0.0f, -INFINITY};
  const SamplingParams params{.temperature = 1.0, .seed = 5};
  for (std::uint64_t step = 0; step < 200; ++step) {
    const canon::TokenId t = sample_token(logits, params, step);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

}  // namespace
}  // namespace prefixgate::engine
