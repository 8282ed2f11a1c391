// The measures of one run (one policy or one target), from its request records: latency
// summaries, throughput, the engine-reported cached fraction of prompt tokens, requests per
// replica and their imbalance, errors by kind. Warm-up requests are left out.
//
//   bench::RunResult r = bench::summarize_run("cache_aware", records, /*replicas=*/8);
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "host_cpu.h"
#include "http_client.h"
#include "percentiles.h"

namespace prefixgate::bench {

struct RunResult {
  std::string policy;            // the policy, or the target's label ("cache_aware (as-sent)")
  double ceiling_hit_rate = -1;  // this row's own ceiling (--rule-sets); < 0: the report's
  std::size_t requests = 0;      // measured (not warm-up), successful or not
  std::size_t errors = 0;
  std::map<std::string, std::size_t> errors_by_kind;
  std::map<std::string, std::string> error_examples;  // kind -> the first such response body
  std::size_t prompt_tokens = 0;                      // over successful measured requests
  std::size_t cached_tokens = 0;
  std::size_t output_tokens = 0;
  double hit_rate = 0;  // cached_tokens / prompt_tokens
  Summary ttft_s;
  Summary itl_s;  // gaps between content chunks
  Summary e2e_s;
  double duration_s = 0;  // first measured send to last measured completion
  double throughput_rps = 0;
  double output_tps = 0;
  // Output tokens/s while requests were still arriving (first to last measured send): with
  // arrivals faster than the fleet serves, the fleet's capacity, free of the ramp-up and of the
  // drain at the end (where the last requests decode in ever smaller batches). Tokens are
  // placed at their chunk's arrival time. 0 when the window is empty (all sent at once).
  double output_tps_arrivals = 0;
  std::map<std::string, std::size_t> requests_per_replica;
  double imbalance = 0;  // max / mean requests per replica
  std::map<std::string, std::size_t> route_reasons;
  // The host's CPU during the run (set by the caller, not from the records): with a sim fleet
  // the figures above are the modelled GPUs' only while the host had CPU to spare.
  HostCpuUse host_cpu;
};

// `replicas`: how many replicas served (those that got nothing count, as zero); 0: the distinct
// replicas seen.
RunResult summarize_run(const std::string& policy, const std::vector<RequestRecord>& records,
                        std::size_t replicas);

}  // namespace prefixgate::bench
