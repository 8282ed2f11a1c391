#include "prefixgate/engine/model_spec.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace prefixgate::engine {

std::size_t ModelSpec::parameter_count() const {
  const std::size_t q_dim = num_heads * head_dim;
  const std::size_t kv_dim = num_kv_heads * head_dim;
  const std::size_t per_layer = 2 * hidden_size                         // attention and MLP norms
                                + 2 * hidden_size * q_dim               // wq, wo
                                + 2 * hidden_size * kv_dim              // wk, wv
                                + 3 * hidden_size * intermediate_size;  // gate, up, down
  const std::size_t embeddings = vocab_size * hidden_size;
  return embeddings + num_layers * per_layer + hidden_size + (tie_word_embeddings ? 0 : embeddings);
}

std::vector<double> ModelSpec::rope_inv_freq() const {
  const std::size_t half = head_dim / 2;
  std::vector<double> inv_freq(half);
  for (std::size_t i = 0; i < half; ++i) {
    inv_freq[i] =
        std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  if (rope_scaling.type == RopeScaling::Type::kLlama3) {
    // Llama 3.1: wavelengths shorter than original_max_position / high_freq_factor are kept,
    // longer than original_max_position / low_freq_factor are stretched by `factor`, and the
    // band between interpolates (Meta's reference `apply_scaling`, as in transformers).
    const RopeScaling& s = rope_scaling;
    const double old_len = static_cast<double>(s.original_max_position);
    const double low_freq_wavelen = old_len / s.low_freq_factor;
    const double high_freq_wavelen = old_len / s.high_freq_factor;
    for (double& f : inv_freq) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_freq_wavelen) continue;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
        continue;
      }
      const double smooth =
          (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv_freq;
}

bool ModelSpec::is_eos(canon::TokenId token) const {
  return token == eos_token ||
         std::find(eos_tokens.begin(), eos_tokens.end(), token) != eos_tokens.end();
}

}  // namespace prefixgate::engine
