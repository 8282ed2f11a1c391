// What `prefixgate-bench soak` prints and writes: a summary with the verdict, the samples as CSV
// (one row per sample, a column pair per process), a JSON document (setup, samples, restarts,
// errors, every check of the verdict) and an SVG chart (RSS, descriptors and the gateway's sizes
// over time, the warm-up shaded and each restart marked).
//
//   bench::SoakReport report{.title = "...", .samples = samples, .verdict = verdict, ...};
//   std::cout << bench::format_soak_summary(report);
//   write("soak.svg", bench::soak_svg(report));
#pragma once

#include <map>
#include <string>
#include <vector>

#include "commands.h"
#include "prefixgate/canonicalize/json.h"
#include "soak.h"

namespace prefixgate::bench {

// A request that failed without a restart to blame.
struct SoakFailure {
  double sent_s = 0;
  double done_s = 0;
  std::string replica;
  std::string error;
  std::string detail;
};

struct SoakReport {
  std::string title = {};
  SoakFlags flags = {};
  SoakVerdictOptions verdict_options = {};
  std::vector<SoakSample> samples = {};
  std::vector<SoakRestart> restarts = {};
  std::size_t requests = 0;
  std::map<std::string, std::size_t> requests_per_replica = {};  // x-prefixgate-replica
  std::map<std::string, std::size_t> errors_by_kind = {};        // not injected
  std::map<std::string, std::size_t> injected_by_kind = {};      // cut by a restart
  std::map<std::string, std::string> error_examples = {};
  SoakVerdict verdict = {};
  std::vector<SoakFailure> failed = {};  // the first 100 kept in the JSON
  std::string setup_json = {};           // judged again (--from): the recording's setup, as is
};

std::string format_soak_summary(const SoakReport& report);
std::string soak_csv(const SoakReport& report);
std::string soak_json(const SoakReport& report);
std::string soak_svg(const SoakReport& report);

}  // namespace prefixgate::bench
