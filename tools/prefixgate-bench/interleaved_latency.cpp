#include "interleaved_latency.h"

#include "percentiles.h"

namespace prefixgate::bench {

void InterleavedLatency::add(const std::string& target, double p50_us, double p99_us) {
  if (runs_.empty() || runs_.back().contains(target)) runs_.emplace_back();
  runs_.back()[target] = Run{p50_us, p99_us};
}

InterleavedLatency::Summary InterleavedLatency::summary(const std::string& target) const {
  Summary s;
  std::vector<double> p50, added_p50, added_p99;
  for (const auto& round : runs_) {
    const auto it = round.find(target);
    if (it == round.end()) continue;
    ++s.rounds;
    p50.push_back(it->second.p50_us);
    s.p99_by_round_us.push_back(it->second.p99_us);
    const auto base = round.find(baseline_);
    if (base == round.end()) continue;
    added_p50.push_back(it->second.p50_us - base->second.p50_us);
    added_p99.push_back(it->second.p99_us - base->second.p99_us);
  }
  s.p50_us = median(p50);
  s.p99_us = median(s.p99_by_round_us);
  s.added_p50_us = median(added_p50);
  s.added_p99_us = median(added_p99);
  return s;
}

}  // namespace prefixgate::bench
