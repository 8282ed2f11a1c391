// The chart of `prefixgate-bench simulate`: every label inside the picture.
#include "simulate_report.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace prefixgate::bench {
namespace {

double svg_width(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<svg[^>]* width=\"([0-9.]+)\"")));
  return m.empty() ? 0 : std::stod(m[1].str());
}

TEST(SimReportTest, TheChartIsWideEnoughForItsLegendAndTitle) {
  SimReport report;
  report.title = "a title long enough to pass the width of one cell of bars, and then some more";
  report.ceiling_hit_rate = 0.5;
  for (const char* policy : {"round_robin", "least_load", "consistent_hash", "sglang_cache_aware",
                             "dynamo_kv", "cache_aware"}) {
    SimResult r;
    r.replicas = 8;
    r.gateways = 1;
    r.load = 0.8;
    r.policy = policy;
    r.hit_rate = 0.4;
    report.results.push_back(r);
  }
  const std::string svg = sim_to_svg(report);
  const double width = svg_width(svg);
  // The last legend entry starts after five others (7 px a character, 30 px apart).
  double legend_end = 10;
  for (const SimResult& r : report.results) {
    legend_end += 30 + 7.0 * static_cast<double>(r.policy.size());
  }
  EXPECT_GE(width, legend_end);
  EXPECT_GE(width, 8.0 * static_cast<double>(report.title.size()));
  // Every x the picture draws at lies inside it.
  const std::regex x_attr("(?:^|\\s)x=\"([0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), x_attr); it != std::sregex_iterator();
       ++it) {
    EXPECT_LT(std::stod((*it)[1].str()), width);
  }
}

TEST(SimReportTest, PeeredCellsAreTheirOwnInTheTableAndTheJson) {
  SimReport report;
  for (double peer_delay_s : {-1.0, 0.0002}) {
    SimResult r;
    r.replicas = 8;
    r.gateways = 3;
    r.load = 0.8;
    r.policy = "cache_aware";
    r.peer_delay_s = peer_delay_s;
    report.results.push_back(r);
  }
  const std::string table = format_sim_table(report);
  EXPECT_NE(table.find("8 replicas, 3 gateways, load 0.80"), std::string::npos) << table;
  EXPECT_NE(table.find("8 replicas, 3 gateways peered (0.2 ms), load 0.80"), std::string::npos)
      << table;
  auto doc = json::parse(sim_to_json(report));
  ASSERT_TRUE(doc.ok());
  const json::Array& results = doc->find("results")->as_array();
  ASSERT_EQ(results.size(), 2U);
  EXPECT_FALSE(results[0].find("peered")->as_bool());
  EXPECT_TRUE(results[0].find("peer_delay_s")->is_null());
  EXPECT_TRUE(results[1].find("peered")->as_bool());
  EXPECT_DOUBLE_EQ(results[1].find("peer_delay_s")->as_number().value, 0.0002);
}

}  // namespace
}  // namespace prefixgate::bench
