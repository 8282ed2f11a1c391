#include "percentiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace prefixgate::bench {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary summarize(std::vector<double> sample) {
  Summary s;
  s.count = sample.size();
  if (sample.empty()) return s;
  std::sort(sample.begin(), sample.end());
  s.mean = std::accumulate(sample.begin(), sample.end(), 0.0) / static_cast<double>(s.count);
  s.p50 = percentile(sample, 50);
  s.p90 = percentile(sample, 90);
  s.p99 = percentile(sample, 99);
  return s;
}

double median(std::vector<double> sample) {
  if (sample.empty()) return 0;
  std::sort(sample.begin(), sample.end());
  const std::size_t n = sample.size();
  return n % 2 == 1 ? sample[n / 2] : (sample[n / 2 - 1] + sample[n / 2]) / 2;
}

}  // namespace prefixgate::bench
