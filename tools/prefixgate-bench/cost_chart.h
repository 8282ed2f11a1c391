// prefixgate-bench cost-chart: a Google Benchmark JSON file (--benchmark_format=json or
// --benchmark_out) drawn as cost against a size, one line per benchmark family: how the cost of
// preparing a request grows with the prompt, with and without the caches.
//
//   build/release/microbench/gateway_bench --benchmark_filter=BM_AgentTurn
//     --benchmark_repetitions=3 --benchmark_format=json > agent_turn.json   (one line)
//   prefixgate-bench cost-chart --input agent_turn.json --svg agent-turn.svg
//
// A run named "BM_AgentTurn/llama3_cache/10" is the point of line "BM_AgentTurn/llama3_cache" at
// x = its counter (default prompt_bytes), y = its CPU time per iteration; with repetitions, the
// median aggregate (or, without aggregates, the median of the repetitions).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/base/status.h"

namespace prefixgate::bench {

struct CostSeries {
  std::string name;                               // the run name less its last component
  std::vector<std::pair<double, double>> points;  // (x, CPU microseconds), by x
};

// The series of a Google Benchmark JSON document, in the order their first run appears.
// kInvalidValue: not such a document, a run without the counter or the CPU time, or no runs.
Result<std::vector<CostSeries>> cost_series(std::string_view benchmark_json,
                                            std::string_view x_counter);

// A line chart of `series`: axes from zero, one colour per line, its last point's y against its
// first's beside the legend (what the prompt's growth costs).
std::string cost_chart_svg(const std::vector<CostSeries>& series, const std::string& title,
                           const std::string& x_label);

struct CostChartFlags {
  std::string input;
  std::string x_counter = "prompt_bytes";
  std::string svg_out;
  std::string title = "CPU per request against prompt length";
};

// Exit status: 0 written, 1 a file could not be read or written, 2 bad input.
int run_cost_chart(const CostChartFlags& flags);

}  // namespace prefixgate::bench
