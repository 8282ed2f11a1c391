// What `prefixgate-bench simulate` prints and writes: one table per (replicas, gateways, load)
// with a row per policy, a JSON document whose field names match compare's where they overlap
// (times in seconds, modelled), and an SVG chart of hit rate and TTFT p99 per cell and policy.
//
//   bench::SimReport report{.title = "trace", .ceiling_hit_rate = 0.65, .results = results};
//   std::cout << bench::format_sim_table(report);
//   write_file("out.json", bench::sim_to_json(report));
#pragma once

#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "simulate.h"

namespace prefixgate::bench {

struct SimReport {
  std::string title;
  double ceiling_hit_rate = 0;
  double capacity_rps_per_replica = 0;  // the modelled capacity --load is a fraction of
  double gpu_hour_usd = 0;              // > 0: cost in dollars too
  json::Object setup;
  std::vector<SimResult> results;
};

// GPU-hours (busy, modelled) per million tokens served, prompt and generated.
double gpu_hours_per_mtok(const SimResult& r);

std::string format_sim_table(const SimReport& report);
std::string sim_to_json(const SimReport& report);
std::string sim_to_svg(const SimReport& report);

}  // namespace prefixgate::bench
