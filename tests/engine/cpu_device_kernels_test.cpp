// Each cpu kernel against a plain loop in double. Tolerances are per operation and stated
// where they are checked.
#include "cpu_device_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace prefixgate::engine::cpu {
namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CpuKernelsTest, LinearIsXTimesWTransposed) {
  const std::size_t rows = 5, in = 37, out = 11;
  const auto x = random_values(rows * in, 1);
  const auto w = random_values(out * in, 2);
  std::vector<float> y(rows * out);
  linear(x.data(), rows, in, w.data(), out, y.data());
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t o = 0; o < out; ++o) {
      double want = 0;
      for (std::size_t i = 0; i < in; ++i)
        want += static_cast<double>(x[r * in + i]) * w[o * in + i];
      EXPECT_NEAR(y[r * out + o], want, 1e-5) << r << "," << o;  // fp32 sum of 37 terms
    }
  }
}

// Strided operands as attention uses them: one head's columns of a wider matrix. m = 1 takes
// the sgemv path, m > 1 the sgemm path; both must agree with the plain loop.
TEST(CpuKernelsTest, StridedGemmsMatchLoopsForOneAndManyRows) {
  const std::size_t n = 13, k = 9, lda = 20, ldb = 11, ldb_nn = 15, ldc = 17;
  for (std::size_t m : {1u, 4u}) {
    const auto a = random_values(m * lda, 10);
    const auto b_nt = random_values(n * ldb, 11);     // [n, k] rows ldb apart
    const auto b_nn = random_values(k * ldb_nn, 13);  // [k, n] rows ldb_nn apart
    std::vector<float> c(m * ldc, -7.0f);
    gemm_nt(m, n, k, 0.5f, a.data(), lda, b_nt.data(), ldb, c.data(), ldc);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double want = 0;
        for (std::size_t l = 0; l < k; ++l) want += double{a[i * lda + l]} * b_nt[j * ldb + l];
        EXPECT_NEAR(c[i * ldc + j], 0.5 * want, 1e-5) << m << " nt " << i << "," << j;
      }
      for (std::size_t j = n; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], -7.0f);  // untouched
    }
    std::fill(c.begin(), c.end(), -7.0f);
    gemm_nn(m, n, k, a.data(), lda, b_nn.data(), ldb_nn, c.data(), ldc);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double want = 0;
        for (std::size_t l = 0; l < k; ++l) want += double{a[i * lda + l]} * b_nn[l * ldb_nn + j];
        EXPECT_NEAR(c[i * ldc + j], want, 1e-5) << m << " nn " << i << "," << j;
      }
    }
  }
}

TEST(CpuKernelsTest, RmsNormScalesEachRowToUnitRms) {
  const std::size_t rows = 3, dim = 64;
  const auto x = random_values(rows * dim, 3, 5.0f);
  const auto weight = random_values(dim, 4);
  std::vector<float> y(rows * dim);
  rms_norm(x.data(), weight.data(), rows, dim, 1e-5, y.data());
  for (std::size_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (std::size_t i = 0; i < dim; ++i)
      sq += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(sq / dim + 1e-5);
    for (std::size_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(y[r * dim + i], x[r * dim + i] * inv * weight[i], 1e-6);
    }
  }
  // In place gives the same.
  std::vector<float> z = x;
  rms_norm(z.data(), weight.data(), rows, dim, 1e-5, z.data());
  EXPECT_EQ(z, y);
}

TEST(CpuKernelsTest, RopeRotatesHalvesByPositionTimesFrequency) {
  const std::size_t rows = 2, heads = 3, head_dim = 8, half = 4;
  auto x = random_values(rows * heads * head_dim, 5);
  const auto original = x;
  std::vector<float> cos(rows * half), sin(rows * half);
  const double positions[] = {0.0, 1234.0};
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = positions[r] * std::pow(10000.0, -2.0 * i / head_dim);
      cos[r * half + i] = static_cast<float>(std::cos(angle));
      sin[r * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  apply_rope(x.data(), rows, heads, head_dim, cos.data(), sin.data());
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t d = 0; d < head_dim; ++d) {
      EXPECT_EQ(x[h * head_dim + d], original[h * head_dim + d]);  // position 0: identity
    }
  }
  for (std::size_t h = 0; h < heads; ++h) {
    const float* v = original.data() + (heads + h) * head_dim;
    const float* got = x.data() + (heads + h) * head_dim;
    double norm_before = 0, norm_after = 0;
    for (std::size_t i = 0; i < half; ++i) {
      const double c = cos[half + i], s = sin[half + i];
      EXPECT_NEAR(got[i], v[i] * c - v[i + half] * s, 1e-6);
      EXPECT_NEAR(got[i + half], v[i + half] * c + v[i] * s, 1e-6);
      norm_before += v[i] * v[i] + v[i + half] * v[i + half];
      norm_after += got[i] * got[i] + got[i + half] * got[i + half];
    }
    EXPECT_NEAR(norm_after, norm_before, 1e-5);  // a rotation keeps the length
  }
}

TEST(CpuKernelsTest, SiluMulMatchesDefinition) {
  auto gate = random_values(100, 6, 8.0f);
  const auto original = gate;
  const auto up = random_values(100, 7);
  silu_mul(gate.data(), up.data(), gate.size());
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const double g = original[i];
    EXPECT_NEAR(gate[i], g / (1 + std::exp(-g)) * up[i], 1e-6 * (1 + std::abs(g)));
  }
}

TEST(CpuKernelsTest, ExpShiftedIsWithinFourTenthsOfAMillionthOfStdExp) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 0.0f; v += 0.00137f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(-1e-30f);
  const auto original = x;
  exp_shifted(x.data(), x.size(), 0.0f);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(original[i]));
    worst = std::max(worst, std::abs(x[i] - want) / want);
  }
  EXPECT_LT(worst, 4e-7);
  // Far below the clamp the result is tiny, never NaN or negative.
  std::vector<float> low = {-100.0f, -1e30f, -INFINITY};
  exp_shifted(low.data(), low.size(), 0.0f);
  for (float v : low) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1e-37f);
  }
  // The shift is subtracted first.
  std::vector<float> shifted = {10.0f, 12.5f};
  exp_shifted(shifted.data(), shifted.size(), 12.5f);
  EXPECT_NEAR(shifted[0], std::exp(-2.5), 1e-7);
  EXPECT_FLOAT_EQ(shifted[1], 1.0f);
}

TEST(CpuKernelsTest, SoftmaxMaskedNormalisesThePrefixAndZeroesTheRest) {
  for (std::size_t valid : {1u, 7u, 8u, 9u, 33u}) {
    auto row = random_values(40, 8 + static_cast<std::uint32_t>(valid), 30.0f);
    const auto original = row;
    softmax_masked(row.data(), valid, row.size());
    double max = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < valid; ++j) max = std::max(max, static_cast<double>(original[j]));
    for (std::size_t j = 0; j < valid; ++j) sum += std::exp(original[j] - max);
    for (std::size_t j = 0; j < valid; ++j) {
      EXPECT_NEAR(row[j], std::exp(original[j] - max) / sum, 1e-6) << valid << " " << j;
    }
    for (std::size_t j = valid; j < row.size(); ++j) EXPECT_EQ(row[j], 0.0f);
  }
}

}  // namespace
}  // namespace prefixgate::engine::cpu
