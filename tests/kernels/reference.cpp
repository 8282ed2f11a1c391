#include "reference.h"

#include <algorithm>
#include <cmath>

#include "cpu_device_kernels.h"

namespace prefixgate::kernels::reference {

std::vector<float> widen(const std::vector<std::uint16_t>& bf16) {
  std::vector<float> out(bf16.size());
  std::transform(bf16.begin(), bf16.end(), out.begin(), from_bf16);
  return out;
}

std::vector<std::uint16_t> narrow(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), to_bf16);
  return out;
}

std::vector<float> rms_norm(std::vector<float>& residual, const std::vector<float>* add,
                            const std::vector<float>& weight, int dim, double eps,
                            const std::vector<std::int32_t>* rows_index) {
  if (add != nullptr) {
    for (std::size_t i = 0; i < add->size(); ++i) residual[i] += (*add)[i];
  }
  const std::size_t d = static_cast<std::size_t>(dim);
  std::vector<float> rows;
  if (rows_index != nullptr) {
    for (std::int32_t r : *rows_index) {
      rows.insert(rows.end(), residual.begin() + static_cast<std::ptrdiff_t>(r * d),
                  residual.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
    }
  } else {
    rows = residual;
  }
  std::vector<float> out(rows.size());
  engine::cpu::rms_norm(rows.data(), weight.data(), rows.size() / d, d, eps, out.data());
  return out;
}

std::vector<float> silu_mul(const std::vector<std::uint16_t>& gate_up, int rows, int inter) {
  const auto n = static_cast<std::size_t>(inter);
  std::vector<float> gate(static_cast<std::size_t>(rows) * n);
  std::vector<float> up(gate.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      gate[r * n + i] = from_bf16(gate_up[r * 2 * n + i]);
      up[r * n + i] = from_bf16(gate_up[r * 2 * n + n + i]);
    }
  }
  engine::cpu::silu_mul(gate.data(), up.data(), gate.size());
  return gate;
}

void rope_table(const std::vector<std::int32_t>& positions, const std::vector<double>& inv_freq,
                std::vector<float>& cos, std::vector<float>& sin) {
  const std::size_t half = inv_freq.size();
  cos.assign(positions.size() * half, 0);
  sin.assign(positions.size() * half, 0);
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (std::size_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[j];
      cos[t * half + j] = static_cast<float>(std::cos(angle));
      sin[t * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

std::vector<float> rope(const std::vector<std::uint16_t>& qkv, int heads, int kv_heads, int dim,
                        const std::vector<float>& cos, const std::vector<float>& sin) {
  std::vector<float> out = widen(qkv);
  const auto width = static_cast<std::size_t>((heads + 2 * kv_heads) * dim);
  const std::size_t rows = qkv.size() / width;
  const std::size_t half = static_cast<std::size_t>(dim) / 2;
  for (std::size_t t = 0; t < rows; ++t) {
    // q and k heads are contiguous: rotate them as heads + kv_heads heads of one row.
    engine::cpu::apply_rope(out.data() + t * width, 1, static_cast<std::size_t>(heads + kv_heads),
                            static_cast<std::size_t>(dim), cos.data() + t * half,
                            sin.data() + t * half);
  }
  return out;
}

std::vector<float> read_kv(const KvCacheView& view, std::int64_t page, int kind, int head,
                           int slot) {
  const std::int64_t offset =
      page * view.page_stride +
      (static_cast<std::int64_t>(kind * view.num_kv_heads + head) * view.page_tokens + slot) *
          view.head_dim;
  std::vector<float> out(static_cast<std::size_t>(view.head_dim));
  if (view.dtype == KvDtype::kBf16) {
    const auto* data = static_cast<const std::uint16_t*>(view.data) + offset;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = from_bf16(data[i]);
  } else {
    const auto* data = static_cast<const std::uint8_t*>(view.data) + offset;
    const float scale =
        view.scales[page * view.scale_page_stride +
                    static_cast<std::int64_t>(kind * view.num_kv_heads + head) * view.page_tokens +
                    slot];
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = from_fp8_e4m3(data[i]) * scale;
  }
  return out;
}

std::vector<double> attend(const KvCacheView& view, const std::int32_t* page_table, int kv_head,
                           const float* q, int keys, float softmax_scale) {
  const auto d = static_cast<std::size_t>(view.head_dim);
  std::vector<double> scores(static_cast<std::size_t>(keys));
  double max_score = -INFINITY;
  for (int t = 0; t < keys; ++t) {
    const std::vector<float> k =
        read_kv(view, page_table[t / view.page_tokens], 0, kv_head, t % view.page_tokens);
    double dot = 0;
    for (std::size_t i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[i];
    scores[static_cast<std::size_t>(t)] = dot * softmax_scale;
    max_score = std::max(max_score, scores[static_cast<std::size_t>(t)]);
  }
  std::vector<double> out(d, 0.0);
  double total = 0;
  for (int t = 0; t < keys; ++t) {
    const double w = std::exp(scores[static_cast<std::size_t>(t)] - max_score);
    total += w;
    const std::vector<float> v =
        read_kv(view, page_table[t / view.page_tokens], 1, kv_head, t % view.page_tokens);
    for (std::size_t i = 0; i < d; ++i) out[i] += w * v[i];
  }
  for (double& o : out) o /= total;
  return out;
}

}  // namespace prefixgate::kernels::reference
