// Latency at one connection, read in rounds that visit every target in turn: what
// `prefixgate-bench overhead --latency-rounds N` reports beside its one run per target.
//
// On a shared host a busy second lands on whichever target is running then. One run per target
// puts all of a disturbance's tail in one target's p99; short runs taken in rounds, each round
// visiting every target, spread it over all of them, and the median over the rounds leaves out
// the rounds a disturbance took. What a proxy adds is read within each round, where the direct
// run and the proxy's ran seconds apart, and then the median taken of those differences.
//
//   bench::InterleavedLatency lat("direct");
//   lat.add("direct", 100, 300);  lat.add("nginx", 130, 340);   // round 1 (p50, p99 in us)
//   lat.add("direct", 110, 900);  lat.add("nginx", 140, 380);   // round 2: a busy second
//   lat.summary("nginx").added_p99_us;   // the median of (340 - 300, 380 - 900)
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace prefixgate::bench {

class InterleavedLatency {
 public:
  explicit InterleavedLatency(std::string baseline) : baseline_(std::move(baseline)) {}

  // One run of `target` in the current round; a round ends where a target is added again.
  void add(const std::string& target, double p50_us, double p99_us);

  struct Summary {
    std::size_t rounds = 0;
    double p50_us = 0;  // medians over the rounds
    double p99_us = 0;
    // Medians over the rounds that have a baseline run of (this round's value - the baseline's);
    // 0 for the baseline itself.
    double added_p50_us = 0;
    double added_p99_us = 0;
    std::vector<double> p99_by_round_us;
  };
  Summary summary(const std::string& target) const;

 private:
  struct Run {
    double p50_us = 0;
    double p99_us = 0;
  };
  std::string baseline_;
  // runs_[round][target]
  std::vector<std::map<std::string, Run>> runs_;
};

}  // namespace prefixgate::bench
