#include "interleaved_rounds.h"

#include <gtest/gtest.h>

namespace prefixgate::bench {
namespace {

TEST(InterleavedRoundsTest, AgainstTheBaselineIsTheMedianOfEachRoundsDifference) {
  InterleavedRounds lat;
  // Three rounds; the second was a busy moment for the direct run, the third for nginx's.
  lat.add("direct", {{"p50", 100}, {"p99", 300}});
  lat.add("nginx", {{"p50", 130}, {"p99", 340}});
  lat.add("direct", {{"p50", 110}, {"p99", 900}});
  lat.add("nginx", {{"p50", 140}, {"p99", 380}});
  lat.add("direct", {{"p50", 105}, {"p99", 310}});
  lat.add("nginx", {{"p50", 135}, {"p99", 2000}});
  const auto p50 = lat.summary("nginx", "p50", "direct");
  EXPECT_EQ(p50.rounds, 3u);
  EXPECT_DOUBLE_EQ(p50.median, 135);
  EXPECT_DOUBLE_EQ(p50.minus_baseline, 30);  // 30, 30, 30
  const auto p99 = lat.summary("nginx", "p99", "direct");
  EXPECT_DOUBLE_EQ(p99.median, 380);
  EXPECT_DOUBLE_EQ(p99.minus_baseline, 40);  // median of 40, -520, 1690
  EXPECT_EQ(p99.by_round, (std::vector<double>{340, 380, 2000}));
  const auto direct = lat.summary("direct", "p99", "direct");
  EXPECT_DOUBLE_EQ(direct.median, 310);
  EXPECT_DOUBLE_EQ(direct.minus_baseline, 0);
  EXPECT_DOUBLE_EQ(direct.over_baseline, 1);
}

TEST(InterleavedRoundsTest, ARatioHoldsStillWhereTheHostsSpeedMovesBetweenRounds) {
  InterleavedRounds rps;
  // The host serves at full speed, then at half, then at a third: the proxy's requests/s move
  // threefold, its ratio to nginx's within each round by a few percent.
  rps.add("nginx", {{"rps", 12000}});
  rps.add("gw", {{"rps", 10800}});
  rps.add("gw", {{"rps", 5600}});  // the next round, in the other order
  rps.add("nginx", {{"rps", 6000}});
  rps.add("nginx", {{"rps", 4000}});
  rps.add("gw", {{"rps", 3800}});
  const auto gw = rps.summary("gw", "rps", "nginx");
  EXPECT_EQ(gw.rounds, 3u);
  EXPECT_DOUBLE_EQ(gw.median, 5600);
  EXPECT_NEAR(gw.over_baseline, 0.9333, 1e-4);  // median of 0.90, 0.933, 0.95
}

TEST(InterleavedRoundsTest, ARoundWithoutTheBaselineCountsForTheTargetButNotAgainstIt) {
  InterleavedRounds lat;
  lat.add("gw", {{"p50", 50}, {"p99", 200}});  // a round the baseline's run failed in
  lat.add("gw", {{"p50", 60}, {"p99", 220}});  // the next round: a target added again starts it
  lat.add("direct", {{"p50", 20}, {"p99", 100}});
  lat.add("gw", {{"p50", 70}, {"p99", 400}});
  lat.add("direct", {{"p50", 30}, {"p99", 150}});
  const auto p50 = lat.summary("gw", "p50", "direct");
  EXPECT_EQ(p50.rounds, 3u);
  EXPECT_DOUBLE_EQ(p50.median, 60);
  EXPECT_DOUBLE_EQ(p50.minus_baseline, 40);                 // rounds 2 and 3: 40, 40
  EXPECT_DOUBLE_EQ(p50.over_baseline, 2.6666666666666665);  // 3 and 2.333: their mean
  EXPECT_DOUBLE_EQ(lat.summary("gw", "p99", "direct").minus_baseline, 185);  // 120, 250
  EXPECT_EQ(lat.summary("unknown", "p99", "direct").rounds, 0u);
  EXPECT_DOUBLE_EQ(lat.summary("unknown", "p99", "direct").median, 0);
  EXPECT_EQ(lat.summary("gw", "rps", "direct").rounds, 0u);  // a metric never measured
}

TEST(InterleavedRoundsTest, ABaselineOfZeroLeavesTheRoundOutOfTheRatioOnly) {
  InterleavedRounds cpu;
  cpu.add("direct", {{"cpu", 0}});
  cpu.add("gw", {{"cpu", 30}});
  cpu.add("direct", {{"cpu", 10}});
  cpu.add("gw", {{"cpu", 25}});
  const auto gw = cpu.summary("gw", "cpu", "direct");
  EXPECT_DOUBLE_EQ(gw.minus_baseline, 22.5);  // 30, 15
  EXPECT_DOUBLE_EQ(gw.over_baseline, 2.5);    // the second round's alone
}

}  // namespace
}  // namespace prefixgate::bench
