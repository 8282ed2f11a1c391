// Estimates a device's speed from the steps it runs, for devices that do not know it from a
// model (the cpu and cuda devices): routers compare replicas of different speeds in seconds
// (the gateway's cost in seconds), and a replica's real speed depends on its hardware, its
// model and what else the host runs, which no configuration states reliably.
//
// Each step's wall time is fitted as
//   seconds = overhead + prefill_seconds_per_token x prefill_tokens
//                      + decode_seconds_per_sequence x decode_sequences
// by least squares over the recent steps (exponentially weighted, so the estimate follows a
// host whose speed changes). Nothing is announced until both kinds of work have been seen often
// enough to separate them, and a fit whose prefill rate is not positive is not announced; the
// per-sequence decode cost is at least the per-token prefill cost (see estimate()).
//
//   SpeedEstimator est;
//   est.add_step(plan.num_prefill_tokens, decode_sequences, seconds);   // after each step
//   if (auto s = est.estimate()) announce(*s);
#pragma once

#include <array>
#include <cstddef>
#include <optional>

#include "prefixgate/engine/device.h"

namespace prefixgate::engine {

class SpeedEstimator {
 public:
  struct Options {
    // Weight of a step after k more steps: decay^k (0.995: about the last 200 steps count).
    double decay = 0.995;
    // Steps with prefill and steps with decodes (weighted) needed before announcing.
    double min_weighted_steps = 8;
  };
  SpeedEstimator() : SpeedEstimator(Options{}) {}
  explicit SpeedEstimator(Options options) : options_(options) {}

  void add_step(std::size_t prefill_tokens, std::size_t decode_sequences, double seconds);
  std::optional<DeviceSpeed> estimate() const;

 private:
  Options options_;
  // Weighted normal equations over x = (1, prefill_tokens, decode_sequences).
  std::array<std::array<double, 3>, 3> xtx_{};
  std::array<double, 3> xty_{};
  double prefill_steps_ = 0;  // weighted count of steps with prefill tokens
  double decode_steps_ = 0;   // and with decode sequences
};

}  // namespace prefixgate::engine
