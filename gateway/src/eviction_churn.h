// Each replica's eviction rate (blocks/s, from PrefixIndex::evicted_blocks), smoothed over
// kWindowSeconds, and relative(r) = its rate over the healthy mean (1 when nothing evicts), for
// cache_aware's memory-aware rules: a replica evicting faster than the others has a younger LRU
// tail, so what a copy there evicts is likelier to be needed again (gateway/ROUTING.md).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway::routing {

class EvictionChurn {
 public:
  static constexpr double kWindowSeconds = 5.0;
  static constexpr double kMaxRelative = 4.0;

  // Reads every replica's eviction count at `now` (once per decision).
  void update(std::span<const ReplicaView> replicas, const PrefixIndex& index,
              Clock::time_point now) {
    const std::span<const std::uint64_t> counts = index.evicted_counts();
    const std::size_t n = std::min(replicas.size(), counts.size());
    states_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      State& c = states_[r];
      const std::uint64_t count = counts[r];
      if (!c.seen || count < c.last) {
        c = {count, now, 0, true};
      } else if (now - c.at >= std::chrono::milliseconds(50)) {  // shorter gaps say little
        const double dt = std::chrono::duration<double>(now - c.at).count();
        const double instant = static_cast<double>(count - c.last) / dt;
        c.rate += (1.0 - std::exp(-dt / kWindowSeconds)) * (instant - c.rate);
        c.last = count;
        c.at = now;
      }
    }
    // Summed apart: in the loop above, the calls would keep the sum in memory, and each
    // iteration would wait for the previous one's store.
    double total = 0;
    std::size_t healthy = 0;
    for (std::size_t r = 0; r < n; ++r) {
      if (replicas[r].healthy) {
        total += states_[r].rate;
        ++healthy;
      }
    }
    mean_ = healthy == 0 ? 0 : total / static_cast<double>(healthy);
  }

  // Replica r's rate over the healthy mean, at most kMaxRelative; 1 before any eviction.
  double relative(std::size_t r) const {
    if (r >= states_.size() || !(mean_ > 0)) return 1.0;
    return std::min(kMaxRelative, states_[r].rate / mean_);
  }

 private:
  struct State {
    std::uint64_t last = 0;
    Clock::time_point at{};
    double rate = 0;
    bool seen = false;
  };
  std::vector<State> states_;  // by replica
  double mean_ = 0;
};

}  // namespace prefixgate::gateway::routing
