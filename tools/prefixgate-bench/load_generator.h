// Drives a workload against one HTTP target and records every request.
//
//   open loop, Poisson:  sessions start at exponential gaps of mean 1/rate (rate = sessions/s,
//                        = requests/s for single-turn workloads); rate inf: all at once
//   open loop, trace:    sessions start at their own arrival_s (a trace's timestamps, scaled)
//   closed loop:         `concurrency` sessions in flight; the next starts when one ends
//
// A conversation's next turn waits for the previous response plus its think time, in every
// mode. The run stops issuing after `max_requests` or `duration_s`; requests in flight finish
// (bounded by the per-request timeout). The first `warmup` requests issued are marked warm-up:
// they load the caches and are left out of the measures.
//
//   bench::LoadOptions load{.mode = bench::LoadMode::kPoisson, .rate = 50};
//   std::vector<bench::RequestRecord> records = bench::run_load(workload, target, load);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "http_client.h"
#include "workload.h"

namespace prefixgate::bench {

enum class LoadMode { kPoisson, kTrace, kClosed };

struct LoadOptions {
  LoadMode mode = LoadMode::kPoisson;
  double rate = 0;               // Poisson: sessions per second; 0 or inf: all at once
  std::size_t concurrency = 64;  // closed loop
  double duration_s = 0;         // 0: until the workload (or max_requests) is done
  std::size_t max_requests = 0;  // 0: the whole workload
  std::size_t warmup = 0;
  double timeout_s = 600;  // per request
  std::uint64_t seed = 1;  // Poisson gaps
  bool progress = true;    // a progress line on stderr
  std::string label;       // shown in the progress line
};

std::vector<RequestRecord> run_load(const Workload& workload, const HttpTarget& target,
                                    const LoadOptions& options);
// Several targets (gateway instances behind a plain load balancer): each request goes to one of
// them uniformly at random (seeded by options.seed), turn by turn.
std::vector<RequestRecord> run_load(const Workload& workload, std::span<const HttpTarget> targets,
                                    const LoadOptions& options);

}  // namespace prefixgate::bench
