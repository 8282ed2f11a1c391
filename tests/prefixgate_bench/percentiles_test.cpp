#include "percentiles.h"

#include <gtest/gtest.h>

#include "run_result.h"

namespace prefixgate::bench {
namespace {

TEST(PercentilesTest, InterpolatesLinearlyLikeNumpy) {
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);  // numpy.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
}

TEST(PercentilesTest, SummarizeSortsAndAverages) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Summary s = summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
}

TEST(PercentilesTest, MedianIsTheMiddleOrTheMeanOfTheTwoMiddleValues) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(RunResultTest, LeavesOutWarmupAndCountsImbalanceOverAllReplicas) {
  std::vector<RequestRecord> records(5);
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i].sent_s = static_cast<double>(i);
    records[i].first_token_s = static_cast<double>(i) + 0.5;
    records[i].done_s = static_cast<double>(i) + 1;
    records[i].prompt_tokens = 100;
    records[i].cached_tokens = 50;
    records[i].completion_tokens = 10;
    records[i].replica = "a";
  }
  records[0].warmup = true;
  records[0].cached_tokens = 0;
  records[4].error = "http_503";
  const RunResult r = summarize_run("p", records, /*replicas=*/2);
  EXPECT_EQ(r.requests, 4u);
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.errors_by_kind.at("http_503"), 1u);
  EXPECT_DOUBLE_EQ(r.hit_rate, 0.5);
  EXPECT_DOUBLE_EQ(r.ttft_s.p50, 0.5);
  EXPECT_DOUBLE_EQ(r.duration_s, 4);  // sent 1 .. done 5
  EXPECT_DOUBLE_EQ(r.throughput_rps, 3.0 / 4);
  EXPECT_DOUBLE_EQ(r.imbalance, 2.0);  // 3 on "a", none on the other of 2
}

}  // namespace
}  // namespace prefixgate::bench
