#include "prefixgate/engine/speed_estimator.h"

#include <algorithm>
#include <cmath>

namespace prefixgate::engine {

void SpeedEstimator::add_step(std::size_t prefill_tokens, std::size_t decode_sequences,
                              double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  if (prefill_tokens == 0 && decode_sequences == 0) return;
  for (auto& row : xtx_) {
    for (double& v : row) v *= options_.decay;
  }
  for (double& v : xty_) v *= options_.decay;
  prefill_steps_ *= options_.decay;
  decode_steps_ *= options_.decay;

  const std::array<double, 3> x{1.0, static_cast<double>(prefill_tokens),
                                static_cast<double>(decode_sequences)};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 3; ++j) xtx_[i][j] += x[i] * x[j];
    xty_[i] += x[i] * seconds;
  }
  if (prefill_tokens > 0) prefill_steps_ += 1;
  if (decode_sequences > 0) decode_steps_ += 1;
}

std::optional<DeviceSpeed> SpeedEstimator::estimate() const {
  if (prefill_steps_ < options_.min_weighted_steps || decode_steps_ < options_.min_weighted_steps) {
    return std::nullopt;
  }
  // Solve the 3x3 normal equations by Cramer's rule; a near-singular system (the two kinds of
  // work always in the same proportion) cannot separate the rates.
  auto det3 = [](const std::array<std::array<double, 3>, 3>& m) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  const double det = det3(xtx_);
  const double scale = xtx_[0][0] * xtx_[1][1] * xtx_[2][2];
  if (!(std::abs(det) > 1e-9 * scale)) return std::nullopt;
  auto solve_for = [&](std::size_t column) {
    auto m = xtx_;
    for (std::size_t i = 0; i < 3; ++i) m[i][column] = xty_[i];
    return det3(m) / det;
  };
  DeviceSpeed speed;
  speed.prefill_seconds_per_token = solve_for(1);
  if (!(speed.prefill_seconds_per_token > 0) || !std::isfinite(speed.prefill_seconds_per_token)) {
    return std::nullopt;
  }
  // On a GPU one more sequence in a decode batch costs little beside reading the weights, and
  // its fitted share can drown in the host's timing noise (even come out negative). A decode
  // token does the work of a prefill token at lower efficiency, so the prefill rate is a floor.
  const double decode = solve_for(2);
  speed.decode_seconds_per_sequence = std::isfinite(decode)
                                          ? std::max(decode, speed.prefill_seconds_per_token)
                                          : speed.prefill_seconds_per_token;
  return speed;
}

}  // namespace prefixgate::engine
