#include "run_result.h"

#include <gtest/gtest.h>

namespace bench = prefixgate::bench;

namespace {

bench::RequestRecord streamed(double sent, double first_token, std::vector<double> gaps,
                              std::size_t tokens) {
  bench::RequestRecord r;
  r.sent_s = sent;
  r.first_token_s = first_token;
  r.gaps_s = std::move(gaps);
  double done = first_token;
  for (double g : r.gaps_s) done += g;
  r.done_s = done;
  r.completion_tokens = tokens;
  r.prompt_tokens = 10;
  r.replica = "r0";
  return r;
}

}  // namespace

TEST(RunResultTest, OutputRateWhileArrivingCountsOnlyTokensInsideTheArrivalWindow) {
  // Sends at 0 and 10: the window is [0, 10]. The first request streams 5 chunks at 1, 2, 3, 4,
  // 5 (inside); the second 5 chunks at 11..15 (after the window, the drain).
  std::vector<bench::RequestRecord> records{streamed(0, 1, {1, 1, 1, 1}, 5),
                                            streamed(10, 11, {1, 1, 1, 1}, 5)};
  bench::RunResult r = bench::summarize_run("p", records, 1);
  EXPECT_DOUBLE_EQ(r.output_tps_arrivals, 5.0 / 10.0);
  EXPECT_DOUBLE_EQ(r.output_tps, 10.0 / 15.0);  // the whole run, drain included
}

TEST(RunResultTest, OutputRateWhileArrivingIsZeroWhenAllAreSentAtOnce) {
  std::vector<bench::RequestRecord> records{streamed(0, 1, {1}, 4), streamed(0, 1, {1}, 4)};
  EXPECT_EQ(bench::summarize_run("p", records, 1).output_tps_arrivals, 0.0);
}
