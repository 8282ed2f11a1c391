// Latency summaries: p50, p90, p99 and the mean of a sample, with linear interpolation between
// order statistics (numpy's default, `percentile(..., method="linear")`, which vLLM's and
// SGLang's serving benchmarks use, so the numbers compare).
//
//   bench::Summary s = bench::summarize({0.1, 0.2, 0.4});   // s.p50 == 0.2
#pragma once

#include <cstddef>
#include <vector>

namespace prefixgate::bench {

// The q-th percentile (0 <= q <= 100) of `sorted` (ascending); 0 for an empty sample.
double percentile(const std::vector<double>& sorted, double q);

struct Summary {
  std::size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

Summary summarize(std::vector<double> sample);

// The middle value of the sample, or the mean of the two middle ones; 0 for an empty sample.
double median(std::vector<double> sample);

}  // namespace prefixgate::bench
