// What a comparison prints and writes: a side-by-side table, a JSON document (times in
// seconds) and an SVG chart of hit rate, throughput and TTFT per policy.
//
//   bench::Report report{.ceiling_hit_rate = 0.88, .results = results};
//   std::cout << bench::format_table(report);
//   write_file("out.json", bench::to_json(report));
//   write_file("out.svg", bench::to_svg(report));
#pragma once

#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "run_result.h"

namespace prefixgate::bench {

struct Report {
  std::string title;            // "shared-prefix, 8 x sim h100:llama3-8b (speedup 2)"
  double ceiling_hit_rate = 0;  // over what the engines cache (after the gateway's rewrites)
  std::string ceiling_rules = "default";  // the rewrites ceiling_hit_rate assumes
  double ceiling_hit_rate_as_sent = 0;
  double ceiling_hit_rate_default = 0;    // the gateway's default rules
  double ceiling_hit_rate_canonical = 0;  // every canonicalization rule on
  json::Object setup;                     // workload and load settings, for the JSON
  std::string time_note;                  // how wall times relate to modelled ones ("": none)
  std::vector<RunResult> results;
};

std::string format_table(const Report& report);
std::string to_json(const Report& report);
std::string to_svg(const Report& report);

}  // namespace prefixgate::bench
