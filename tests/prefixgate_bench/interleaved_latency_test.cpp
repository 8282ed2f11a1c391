#include "interleaved_latency.h"

#include <gtest/gtest.h>

namespace prefixgate::bench {
namespace {

TEST(InterleavedLatencyTest, AddedIsTheMedianOfEachRoundsDifferenceFromTheBaseline) {
  InterleavedLatency lat("direct");
  // Three rounds; the second was a busy moment for the direct run, the third for nginx's.
  lat.add("direct", 100, 300);
  lat.add("nginx", 130, 340);
  lat.add("direct", 110, 900);
  lat.add("nginx", 140, 380);
  lat.add("direct", 105, 310);
  lat.add("nginx", 135, 2000);
  const auto nginx = lat.summary("nginx");
  EXPECT_EQ(nginx.rounds, 3u);
  EXPECT_DOUBLE_EQ(nginx.p50_us, 135);
  EXPECT_DOUBLE_EQ(nginx.p99_us, 380);
  EXPECT_DOUBLE_EQ(nginx.added_p50_us, 30);  // 30, 30, 30
  EXPECT_DOUBLE_EQ(nginx.added_p99_us, 40);  // median of 40, -520, 1690
  EXPECT_EQ(nginx.p99_by_round_us, (std::vector<double>{340, 380, 2000}));
  const auto direct = lat.summary("direct");
  EXPECT_DOUBLE_EQ(direct.p99_us, 310);
  EXPECT_DOUBLE_EQ(direct.added_p99_us, 0);
}

TEST(InterleavedLatencyTest, ARoundWithoutTheBaselineCountsForTheTargetButNotItsAddedTime) {
  InterleavedLatency lat("direct");
  lat.add("gw", 50, 200);  // a round the baseline's run failed in
  lat.add("gw", 60, 220);  // the next round: a target added again starts it
  lat.add("direct", 20, 100);
  lat.add("gw", 70, 400);
  lat.add("direct", 30, 150);
  const auto gw = lat.summary("gw");
  EXPECT_EQ(gw.rounds, 3u);
  EXPECT_DOUBLE_EQ(gw.p50_us, 60);
  EXPECT_DOUBLE_EQ(gw.added_p50_us, 40);   // rounds 2 and 3: 40, 40
  EXPECT_DOUBLE_EQ(gw.added_p99_us, 185);  // 120, 250
  EXPECT_EQ(lat.summary("unknown").rounds, 0u);
  EXPECT_DOUBLE_EQ(lat.summary("unknown").p99_us, 0);
}

}  // namespace
}  // namespace prefixgate::bench
