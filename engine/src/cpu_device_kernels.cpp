#include "cpu_device_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "prefixgate/base/check.h"

namespace prefixgate::engine::cpu {

namespace {
blasint blas(std::size_t v) {
  return static_cast<blasint>(v);
}
}  // namespace

void gemm_nt(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
             std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (m == 1) {
    // c[0, :] = alpha * B a[0, :]
    cblas_sgemv(CblasRowMajor, CblasNoTrans, blas(n), blas(k), alpha, b, blas(ldb), a, 1, 0.0f, c,
                1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas(m), blas(n), blas(k), alpha, a,
              blas(lda), b, blas(ldb), 0.0f, c, blas(ldc));
}

void gemm_nn(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
             const float* b, std::size_t ldb, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (m == 1) {
    // c[0, :] = B^T a[0, :]
    cblas_sgemv(CblasRowMajor, CblasTrans, blas(k), blas(n), 1.0f, b, blas(ldb), a, 1, 0.0f, c, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas(m), blas(n), blas(k), 1.0f, a,
              blas(lda), b, blas(ldb), 0.0f, c, blas(ldc));
}

void linear(const float* x, std::size_t rows, std::size_t in, const float* w, std::size_t out,
            float* y) {
  gemm_nt(rows, out, in, 1.0f, x, in, w, in, y, out);
}

void rms_norm(const float* x, const float* weight, std::size_t rows, std::size_t dim, double eps,
              float* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    // The sum of squares in double: hidden sizes of thousands would lose bits in fp32.
    double sum_sq = 0.0;
    for (std::size_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const auto inv_rms =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (std::size_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv_rms * weight[i];
  }
}

void apply_rope(float* x, std::size_t rows, std::size_t heads, std::size_t head_dim,
                const float* cos, const float* sin) {
  const std::size_t half = head_dim / 2;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (std::size_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim;
      for (std::size_t i = 0; i < half; ++i) {
        const float a = v[i];
        const float b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void silu_mul(float* gate, const float* up, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

namespace {

// Floats as integers ordered like the floats (NaN aside): flip the magnitude bits of negatives.
// Integer min/max vectorise under strict IEEE semantics; float compare-and-select does not
// (GCC keeps it a branch without -ffinite-math-only), and these loops are the softmax's cost.
std::int32_t ordered_bits(float f) {
  const auto b = std::bit_cast<std::int32_t>(f);
  return b ^ ((b >> 31) & 0x7fffffff);
}
float from_ordered_bits(std::int32_t b) {
  return std::bit_cast<float>(b ^ ((b >> 31) & 0x7fffffff));
}

}  // namespace

void exp_shifted(float* x, std::size_t n, float shift) {
  // e^v = 2^k * e^r with k = round(v / ln 2) and |r| <= ln(2)/2; e^r by its Taylor series to
  // r^6 (truncation error |r|^7/7! < 1.3e-7). ln 2 is split in two (Cody and Waite) so that
  // k * ln2_hi is exact and r keeps its low bits. k is rounded by adding and subtracting
  // 1.5 * 2^23, which leaves the integer part in the mantissa under round-to-nearest.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // 8 significant bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;
  // v is clamped to -87 so that 2^k stays a normal float (k >= -126). The clamp works on the
  // magnitude bits (v <= 0): an integer min, which vectorises; NaN clamps to -87 too.
  const std::int32_t kMaxMagnitude = std::bit_cast<std::int32_t>(87.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t magnitude =
        std::min(std::bit_cast<std::int32_t>(x[i] - shift) & 0x7fffffff, kMaxMagnitude);
    const float v = -std::bit_cast<float>(magnitude);
    const float k = (v * kLog2e + kRound) - kRound;
    const float r = (v - k * kLn2Hi) - k * kLn2Lo;
    const float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    const auto exponent = static_cast<std::uint32_t>(static_cast<std::int32_t>(k) + 127);
    x[i] = p * std::bit_cast<float>(exponent << 23);
  }
}

void softmax_masked(float* row, std::size_t valid, std::size_t width) {
  PG_DCHECK(valid >= 1 && valid <= width);
  std::int32_t max_bits = ordered_bits(row[0]);
  for (std::size_t j = 1; j < valid; ++j) max_bits = std::max(max_bits, ordered_bits(row[j]));
  exp_shifted(row, valid, from_ordered_bits(max_bits));
  // fp32 partial sums in 8 lanes (vectorisable) are exact enough: terms are in (0, 1].
  float lanes[8] = {};
  std::size_t j = 0;
  for (; j + 8 <= valid; j += 8) {
    for (std::size_t l = 0; l < 8; ++l) lanes[l] += row[j + l];
  }
  double sum = 0.0;
  for (float lane : lanes) sum += lane;
  for (; j < valid; ++j) sum += row[j];
  const auto inv = static_cast<float>(1.0 / sum);
  for (std::size_t i = 0; i < valid; ++i) row[i] *= inv;
  std::fill(row + valid, row + width, 0.0f);
}

}  // namespace prefixgate::engine::cpu
