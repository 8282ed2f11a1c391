// Measurements taken in rounds that visit every target in turn: what `prefixgate-bench overhead`
// reports beside its one run per target, for latency at one connection (--latency-rounds) and
// for requests/s and CPU under load (--rounds).
//
// On a shared host a busy second lands on whichever target is running then. One run per target
// puts all of a disturbance in one target's figures; short runs taken in rounds, each round
// visiting every target, spread it over all of them, and the median over the rounds leaves out
// the rounds a disturbance took. A target against a baseline is read within each round, where
// both ran seconds apart (their difference, or their ratio), and then the median taken of those.
//
//   bench::InterleavedRounds lat;
//   lat.add("direct", {{"p99", 300}});  lat.add("nginx", {{"p99", 340}});   // round 1
//   lat.add("direct", {{"p99", 900}});  lat.add("nginx", {{"p99", 380}});   // round 2: busy
//   lat.summary("nginx", "p99", "direct").minus_baseline;   // the median of (40, -520)
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace prefixgate::bench {

class InterleavedRounds {
 public:
  // One run of `target` in the current round, its values by metric; a round ends where a target
  // is added again.
  void add(const std::string& target, std::map<std::string, double> values);

  struct Summary {
    std::size_t rounds = 0;  // rounds with this target's value of the metric
    double median = 0;       // over those rounds
    // Medians over the rounds that have the baseline's value too: (this - the baseline's) and
    // (this / the baseline's; rounds where the baseline's is 0 left out). 0 and 1 for the
    // baseline itself.
    double minus_baseline = 0;
    double over_baseline = 0;
    std::vector<double> by_round;
  };
  Summary summary(const std::string& target, const std::string& metric,
                  const std::string& baseline) const;

 private:
  // rounds_[round][target][metric]
  std::vector<std::map<std::string, std::map<std::string, double>>> rounds_;
};

}  // namespace prefixgate::bench
