// prefixgate-bench cost-chart: Google Benchmark JSON read into one line per benchmark family
// (medians of repetitions, or the median aggregates), and drawn.
#include "cost_chart.h"

#include <gtest/gtest.h>

#include <string>

namespace prefixgate::bench {
namespace {

std::string run(const std::string& name, const std::string& type, double cpu, double bytes,
                const std::string& unit = "us", const std::string& aggregate = "") {
  std::string r = R"({"name":")" + name + (aggregate.empty() ? "" : "_" + aggregate) +
                  R"(","run_name":")" + name + R"(","run_type":")" + type + R"(","cpu_time":)" +
                  std::to_string(cpu) + R"(,"time_unit":")" + unit + R"(","prompt_bytes":)" +
                  std::to_string(bytes);
  if (!aggregate.empty()) r += R"(,"aggregate_name":")" + aggregate + "\"";
  return r + "}";
}

TEST(CostChart, OneLinePerFamilyAtTheMedianOfItsRepetitions) {
  const std::string doc =
      R"({"context":{},"benchmarks":[)" + run("BM_T/a/10", "iteration", 30, 30000) + "," +
      run("BM_T/a/10", "iteration", 10, 30000) + "," + run("BM_T/a/10", "iteration", 20, 30000) +
      "," + run("BM_T/a/0", "iteration", 5000, 3000, "ns") + "," +
      run("BM_T/b/0", "iteration", 1, 3000) + "," +
      run("BM_T/b/0", "aggregate", 7, 3000, "us", "mean") + "," +
      run("BM_T/b/0", "aggregate", 2, 3000, "us", "median") + "]}";
  auto series = cost_series(doc, "prompt_bytes");
  ASSERT_TRUE(series.ok()) << series.error().message;
  ASSERT_EQ(series->size(), 2U);
  EXPECT_EQ((*series)[0].name, "BM_T/a");
  ASSERT_EQ((*series)[0].points.size(), 2U);
  EXPECT_EQ((*series)[0].points[0], (std::pair<double, double>{3000, 5}));  // ns -> us, by x
  EXPECT_EQ((*series)[0].points[1], (std::pair<double, double>{30000, 20}));
  EXPECT_EQ((*series)[1].name, "BM_T/b");
  EXPECT_EQ((*series)[1].points[0].second, 2);  // the median aggregate, not the mean

  const std::string svg = cost_chart_svg(*series, "a <title>", "prompt_bytes");
  EXPECT_NE(svg.find("a &lt;title&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<polyline") != std::string::npos, true);
  EXPECT_NE(svg.find("BM_T/a (4x)"), std::string::npos) << svg;  // 20 us against 5 us
}

TEST(CostChart, BadInputIsNamed) {
  EXPECT_FALSE(cost_series("not json", "prompt_bytes").ok());
  EXPECT_FALSE(cost_series(R"({"runs":[]})", "prompt_bytes").ok());
  EXPECT_FALSE(cost_series(R"({"benchmarks":[]})", "prompt_bytes").ok());
  auto missing =
      cost_series(R"({"benchmarks":[)" + run("BM_T/a/1", "iteration", 1, 2) + "]}", "tokens");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("\"tokens\""), std::string::npos);
}

}  // namespace
}  // namespace prefixgate::bench
