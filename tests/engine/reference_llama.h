// A plain Llama forward pass for tests: the whole sequence recomputed from scratch in double,
// contiguous, no cache, no batching, no BLAS, written as directly from the equations as
// possible. The cpu device (fp32, paged, batched, sgemm) is checked against it. Header-only:
// the engine_tests target compiles only *_test.cpp files.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "prefixgate/engine/model.h"

namespace prefixgate::engine::testing {
namespace reference_detail {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// y[t] = W x[t] for W stored [out, in] row-major.
inline Matrix matmul_t(const Matrix& x, const std::vector<float>& w, std::size_t out,
                       std::size_t in) {
  Matrix y(x.size(), std::vector<double>(out, 0.0));
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (std::size_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (std::size_t i = 0; i < in; ++i) acc += static_cast<double>(w[o * in + i]) * x[t][i];
      y[t][o] = acc;
    }
  }
  return y;
}

inline Matrix rms_norm(const Matrix& x, const std::vector<float>& weight, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double mean_sq = 0.0;
    for (double v : row) mean_sq += v * v;
    mean_sq /= static_cast<double>(row.size());
    const double inv = 1.0 / std::sqrt(mean_sq + eps);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = row[i] * inv * weight[i];
  }
  return y;
}

// Rotate-half RoPE of every head of every row; row t is at position t.
inline void rope(Matrix& x, std::size_t heads, std::size_t head_dim,
                 const std::vector<double>& inv_freq) {
  const std::size_t half = head_dim / 2;
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (std::size_t h = 0; h < heads; ++h) {
      double* v = x[t].data() + h * head_dim;
      for (std::size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(t) * inv_freq[i];
        const double a = v[i], b = v[i + half];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace reference_detail

// Logits for every position of `tokens`: [tokens.size(), vocab_size].
inline std::vector<double> reference_logits(const Model& model,
                                            std::span<const canon::TokenId> tokens) {
  using reference_detail::matmul_t;
  using reference_detail::Matrix;
  using reference_detail::rms_norm;
  using reference_detail::rope;
  const ModelSpec& s = model.spec;
  const ModelWeights& w = *model.weights;
  const std::size_t n = tokens.size();
  const std::size_t hd = s.head_dim;
  const std::size_t group = s.num_heads / s.num_kv_heads;
  // Unscaled RoPE is recomputed here from theta; a scaled model uses the spec's frequencies,
  // whose formula model_spec_test checks on its own.
  std::vector<double> inv_freq(hd / 2);
  for (std::size_t i = 0; i < hd / 2; ++i) {
    inv_freq[i] =
        1.0 / std::pow(s.rope_theta, static_cast<double>(2 * i) / static_cast<double>(hd));
  }
  if (s.rope_scaling.type != RopeScaling::Type::kNone) inv_freq = s.rope_inv_freq();

  Matrix x(n, std::vector<double>(s.hidden_size));
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t i = 0; i < s.hidden_size; ++i)
      x[t][i] = w.embed[tokens[t] * s.hidden_size + i];
  }
  for (const LayerWeights& l : w.layers) {
    const Matrix h = rms_norm(x, l.attn_norm, s.rms_norm_eps);
    Matrix q = matmul_t(h, l.wq, s.num_heads * hd, s.hidden_size);
    Matrix k = matmul_t(h, l.wk, s.num_kv_heads * hd, s.hidden_size);
    const Matrix v = matmul_t(h, l.wv, s.num_kv_heads * hd, s.hidden_size);
    rope(q, s.num_heads, hd, inv_freq);
    rope(k, s.num_kv_heads, hd, inv_freq);

    Matrix attn(n, std::vector<double>(s.num_heads * hd, 0.0));
    for (std::size_t t = 0; t < n; ++t) {
      for (std::size_t head = 0; head < s.num_heads; ++head) {
        const std::size_t kvh = head / group;
        std::vector<double> p(t + 1);
        double max = -INFINITY;
        for (std::size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (std::size_t d = 0; d < hd; ++d) dot += q[t][head * hd + d] * k[j][kvh * hd + d];
          p[j] = dot / std::sqrt(static_cast<double>(hd));
          max = std::max(max, p[j]);
        }
        double sum = 0.0;
        for (double& e : p) sum += (e = std::exp(e - max));
        for (std::size_t j = 0; j <= t; ++j) {
          for (std::size_t d = 0; d < hd; ++d) {
            attn[t][head * hd + d] += p[j] / sum * v[j][kvh * hd + d];
          }
        }
      }
    }
    const Matrix o = matmul_t(attn, l.wo, s.hidden_size, s.num_heads * hd);
    for (std::size_t t = 0; t < n; ++t) {
      for (std::size_t i = 0; i < s.hidden_size; ++i) x[t][i] += o[t][i];
    }

    const Matrix h2 = rms_norm(x, l.mlp_norm, s.rms_norm_eps);
    Matrix gate = matmul_t(h2, l.w_gate, s.intermediate_size, s.hidden_size);
    const Matrix up = matmul_t(h2, l.w_up, s.intermediate_size, s.hidden_size);
    for (std::size_t t = 0; t < n; ++t) {
      for (std::size_t i = 0; i < s.intermediate_size; ++i) {
        const double g = gate[t][i];
        gate[t][i] = g / (1.0 + std::exp(-g)) * up[t][i];
      }
    }
    const Matrix down = matmul_t(gate, l.w_down, s.hidden_size, s.intermediate_size);
    for (std::size_t t = 0; t < n; ++t) {
      for (std::size_t i = 0; i < s.hidden_size; ++i) x[t][i] += down[t][i];
    }
  }
  const Matrix final_h = rms_norm(x, w.final_norm, s.rms_norm_eps);
  const Matrix logits =
      matmul_t(final_h, s.tie_word_embeddings ? w.embed : w.lm_head, s.vocab_size, s.hidden_size);
  std::vector<double> flat;
  flat.reserve(n * s.vocab_size);
  for (const auto& row : logits) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

// The greedy choice (lowest id on ties) from one row of logits.
inline canon::TokenId reference_argmax(std::span<const double> row) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return static_cast<canon::TokenId>(best);
}

}  // namespace prefixgate::engine::testing
