// Every kernel against its CPU reference (reference.h), per operation with its own tolerance:
//   exact        embedding, argmax, generated weights (no arithmetic, or the same arithmetic);
//   2 bf16 ulps  RMSNorm, SiLU-and-mul, RoPE and the bf16 K/V it stores (fp32 maths, one
//                rounding to bf16, which may land on either side);
//   e4m3 bound   the fp8 K/V store: |x - dequant(x)| <= 2^-4 |x| + scale * 2^-9 (3 mantissa bits,
//                round to nearest; subnormal spacing 2^-9 in scaled units);
//   attention    8e-3 of the largest output against a double reference reading the same pages
//                (fp32 accumulation and the bf16 output rounding);
//   GEMM         1e-3 of the largest output (fp32 accumulation order).
// Runs in the CPU emulator (kernels_emu_tests) and on a GPU (kernels_gpu_tests, label gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend.h"
#include "prefixgate/kernels/params.h"
#include "reference.h"

namespace prefixgate::kernels {
namespace {

using testing::DeviceBuffer;

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  return reference::narrow(random_floats(n, seed, scale));
}

::testing::AssertionResult near_bf16(const std::vector<float>& got, const std::vector<float>& want,
                                     float ulps = 2) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float bound = ulps * std::ldexp(std::abs(want[i]), -8) + 1e-6f;
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      return ::testing::AssertionFailure() << "at " << i << ": got " << got[i] << ", want "
                                           << want[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult near_scaled(const std::vector<float>& got,
                                       const std::vector<double>& want, double relative) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  double max_want = 0;
  for (double w : want) max_want = std::max(max_want, std::abs(w));
  const double bound = relative * std::max(1e-3, max_want);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      return ::testing::AssertionFailure() << "at " << i << ": got " << got[i] << ", want "
                                           << want[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// A one-layer KV pool on the device, with a host mirror for the references.
struct Pool {
  Pool(Ops& ops, KvDtype dtype, int kv_heads, int head_dim, int pages, int page_tokens = 16)
      : view{.dtype = dtype,
             .page_stride = 2LL * kv_heads * page_tokens * head_dim,
             .scale_page_stride = 2LL * kv_heads * page_tokens,
             .page_tokens = page_tokens,
             .num_kv_heads = kv_heads,
             .head_dim = head_dim},
        elements(static_cast<std::size_t>(view.page_stride) * static_cast<std::size_t>(pages)),
        scales_count(static_cast<std::size_t>(view.scale_page_stride) *
                     static_cast<std::size_t>(pages)),
        data(ops, elements * element_bytes()),
        scales(ops, scales_count) {
    view.data = data.get();
    view.scales = scales.get();
  }

  std::size_t element_bytes() const { return view.dtype == KvDtype::kBf16 ? 2 : 1; }

  // Random K/V everywhere (fp8: each row quantized with its own scale, as rope_kv_write does).
  void fill_random(Ops& ops, std::uint32_t seed) {
    std::vector<float> values = random_floats(elements, seed, 2.0f);
    std::vector<std::uint8_t> bytes(elements * element_bytes());
    std::vector<float> row_scales(scales_count, 0.0f);
    if (view.dtype == KvDtype::kBf16) {
      const std::vector<std::uint16_t> bits = reference::narrow(values);
      std::memcpy(bytes.data(), bits.data(), bytes.size());
    } else {
      const auto d = static_cast<std::size_t>(view.head_dim);
      for (std::size_t row = 0; row < scales_count; ++row) {
        float amax = 0;
        for (std::size_t i = 0; i < d; ++i) amax = std::max(amax, std::abs(values[row * d + i]));
        row_scales[row] = amax / kFp8E4m3Max;
        for (std::size_t i = 0; i < d; ++i) {
          bytes[row * d + i] = to_fp8_e4m3(values[row * d + i] * kFp8E4m3Max / amax);
        }
      }
    }
    ops.copy_to_device(data.get(), bytes.data(), bytes.size());
    ops.copy_to_device(scales.get(), row_scales.data(), row_scales.size() * sizeof(float));
    ops.synchronize();
  }

  // Moves page from[i]'s contents to page i, for every i: the same K/V under a contiguous table.
  void gather_pages(Ops& ops, const std::vector<std::int32_t>& from) {
    host_view();
    const std::size_t page_bytes = static_cast<std::size_t>(view.page_stride) * element_bytes();
    const auto page_scales = static_cast<std::size_t>(view.scale_page_stride);
    std::vector<std::uint8_t> bytes(host_bytes.size(), 0);
    std::vector<float> moved_scales(host_scales.size(), 0.0f);
    for (std::size_t i = 0; i < from.size(); ++i) {
      const auto src = static_cast<std::size_t>(from[i]);
      std::memcpy(bytes.data() + i * page_bytes, host_bytes.data() + src * page_bytes, page_bytes);
      std::memcpy(moved_scales.data() + i * page_scales, host_scales.data() + src * page_scales,
                  page_scales * sizeof(float));
    }
    ops.copy_to_device(data.get(), bytes.data(), bytes.size());
    ops.copy_to_device(scales.get(), moved_scales.data(), moved_scales.size() * sizeof(float));
    ops.synchronize();
  }

  // The pool as it is on the device now, and a view of that host copy.
  KvCacheView host_view() {
    host_bytes = data.read();
    host_scales = scales.read();
    KvCacheView h = view;
    h.data = host_bytes.data();
    h.scales = host_scales.data();
    return h;
  }

  KvCacheView view;
  std::size_t elements;
  std::size_t scales_count;
  DeviceBuffer<std::uint8_t> data;
  DeviceBuffer<float> scales;
  std::vector<std::uint8_t> host_bytes;
  std::vector<float> host_scales;
};

// Page tables: `pages` distinct pages per sequence drawn from the pool in a random order, so
// that neighbouring positions live far apart.
std::vector<std::int32_t> scattered_pages(int seqs, int pages_each, int pool_pages,
                                          std::uint32_t seed) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(pool_pages));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(seed));
  all.resize(static_cast<std::size_t>(seqs * pages_each));
  return all;
}

TEST(KernelsTest, EmbeddingGathersRows) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const int vocab = 50, hidden = 40;
  const auto table = random_bf16(static_cast<std::size_t>(vocab * hidden), 1);
  const std::vector<std::int32_t> ids = {3, 0, 49, 3, 17};
  DeviceBuffer<std::uint16_t> d_table(ops, table);
  DeviceBuffer<std::int32_t> d_ids(ops, ids);
  DeviceBuffer<float> d_out(ops, ids.size() * hidden);
  ops.embedding({.token_ids = d_ids.get(),
                 .table = d_table.get(),
                 .out = d_out.get(),
                 .num_tokens = 5,
                 .hidden = hidden});
  const std::vector<float> out = d_out.read();
  for (std::size_t t = 0; t < ids.size(); ++t) {
    for (int i = 0; i < hidden; ++i) {
      ASSERT_EQ(out[t * hidden + static_cast<std::size_t>(i)],
                from_bf16(table[static_cast<std::size_t>(ids[t] * hidden + i)]));
    }
  }
}

TEST(KernelsTest, RmsNormAddsResidualThenNormalizes) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  for (int dim : {64, 300, 4096, 5000}) {  // 5000: past what a thread holds in registers
    const int rows = 3;
    const std::size_t n = static_cast<std::size_t>(rows * dim);
    std::vector<float> residual = random_floats(n, 2, 3.0f);
    const std::vector<float> add = random_floats(n, 3);
    const std::vector<float> weight = random_floats(static_cast<std::size_t>(dim), 4, 2.0f);
    DeviceBuffer<float> d_residual(ops, residual);
    DeviceBuffer<float> d_add(ops, add);
    DeviceBuffer<float> d_weight(ops, weight);
    DeviceBuffer<std::uint16_t> d_out(ops, n);
    ops.rms_norm({.residual = d_residual.get(),
                  .add = d_add.get(),
                  .weight = d_weight.get(),
                  .out = d_out.get(),
                  .rows = rows,
                  .dim = dim,
                  .eps = 1e-5f});
    const std::vector<float> want = reference::rms_norm(residual, &add, weight, dim, 1e-5, nullptr);
    EXPECT_TRUE(near_bf16(reference::widen(d_out.read()), want)) << "dim " << dim;
    const std::vector<float> new_residual = d_residual.read();
    for (std::size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(new_residual[i], residual[i]);
  }
}

TEST(KernelsTest, RmsNormReadsOnlyIndexedRows) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const int dim = 96;
  std::vector<float> residual = random_floats(5 * 96, 5, 3.0f);
  const std::vector<float> weight = random_floats(96, 6);
  const std::vector<std::int32_t> rows = {4, 1};
  DeviceBuffer<float> d_residual(ops, residual);
  DeviceBuffer<float> d_weight(ops, weight);
  DeviceBuffer<std::int32_t> d_rows(ops, rows);
  DeviceBuffer<std::uint16_t> d_out(ops, 2 * 96);
  ops.rms_norm({.residual = d_residual.get(),
                .weight = d_weight.get(),
                .out = d_out.get(),
                .rows_index = d_rows.get(),
                .rows = 2,
                .dim = dim,
                .eps = 1e-6f});
  const std::vector<float> want = reference::rms_norm(residual, nullptr, weight, dim, 1e-6, &rows);
  EXPECT_TRUE(near_bf16(reference::widen(d_out.read()), want));
}

TEST(KernelsTest, SiluMulMatchesCpuDevice) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const int rows = 4, inter = 333;
  const auto gate_up = random_bf16(static_cast<std::size_t>(rows * 2 * inter), 7, 6.0f);
  DeviceBuffer<std::uint16_t> d_in(ops, gate_up);
  DeviceBuffer<std::uint16_t> d_out(ops, static_cast<std::size_t>(rows * inter));
  ops.silu_mul({.gate_up = d_in.get(), .out = d_out.get(), .rows = rows, .inter = inter});
  EXPECT_TRUE(near_bf16(reference::widen(d_out.read()), reference::silu_mul(gate_up, rows, inter)));
}

TEST(KernelsTest, RopeTableUsesDoubleAngles) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const std::vector<std::int32_t> positions = {0, 1, 17, 8191, 131071};
  std::vector<double> inv_freq(64);
  for (std::size_t j = 0; j < inv_freq.size(); ++j) {
    inv_freq[j] = std::pow(500000.0, -2.0 * static_cast<double>(j) / 128.0);
  }
  DeviceBuffer<std::int32_t> d_pos(ops, positions);
  DeviceBuffer<double> d_freq(ops, inv_freq);
  DeviceBuffer<float> d_cos(ops, positions.size() * 64);
  DeviceBuffer<float> d_sin(ops, positions.size() * 64);
  ops.rope_table({.positions = d_pos.get(),
                  .inv_freq = d_freq.get(),
                  .cos = d_cos.get(),
                  .sin = d_sin.get(),
                  .num_tokens = 5,
                  .half_dim = 64});
  std::vector<float> cos, sin;
  reference::rope_table(positions, inv_freq, cos, sin);
  const std::vector<float> got_cos = d_cos.read(), got_sin = d_sin.read();
  for (std::size_t i = 0; i < cos.size(); ++i) {
    ASSERT_NEAR(got_cos[i], cos[i], 1e-6) << i;
    ASSERT_NEAR(got_sin[i], sin[i], 1e-6) << i;
  }
}

// RoPE + KV write, bf16 and fp8: q rotated in place, K (rotated) and V in their pages, and no
// other slot touched.
void check_rope_kv_write(Ops& ops, KvDtype dtype) {
  const int heads = 4, kv_heads = 2, dim = 32, tokens = 5, pages = 4;
  const int width = (heads + 2 * kv_heads) * dim;
  const auto qkv = random_bf16(static_cast<std::size_t>(tokens * width), 8, 2.0f);
  const std::vector<std::int32_t> positions = {0, 5, 16, 33, 47};
  const std::vector<std::int64_t> slots = {3 * 16 + 0, 3 * 16 + 5, 0 * 16 + 0, 2 * 16 + 1,
                                           2 * 16 + 15};
  std::vector<double> inv_freq(dim / 2);
  for (std::size_t j = 0; j < inv_freq.size(); ++j) {
    inv_freq[j] = std::pow(10000.0, -2.0 * static_cast<double>(j) / dim);
  }
  std::vector<float> cos, sin;
  reference::rope_table(positions, inv_freq, cos, sin);

  Pool pool(ops, dtype, kv_heads, dim, pages);
  DeviceBuffer<std::uint16_t> d_qkv(ops, qkv);
  DeviceBuffer<float> d_cos(ops, cos);
  DeviceBuffer<float> d_sin(ops, sin);
  DeviceBuffer<std::int64_t> d_slots(ops, slots);
  ops.rope_kv_write({.qkv = d_qkv.get(),
                     .cos = d_cos.get(),
                     .sin = d_sin.get(),
                     .slots = d_slots.get(),
                     .cache = pool.view,
                     .num_tokens = tokens,
                     .num_heads = heads});
  const std::vector<float> want = reference::rope(qkv, heads, kv_heads, dim, cos, sin);
  const std::vector<float> got_qkv = reference::widen(d_qkv.read());
  for (int t = 0; t < tokens; ++t) {
    const auto row = static_cast<std::size_t>(t * width);
    std::vector<float> got_q(got_qkv.begin() + static_cast<std::ptrdiff_t>(row),
                             got_qkv.begin() + static_cast<std::ptrdiff_t>(row + heads * dim));
    std::vector<float> want_q(want.begin() + static_cast<std::ptrdiff_t>(row),
                              want.begin() + static_cast<std::ptrdiff_t>(row + heads * dim));
    ASSERT_TRUE(near_bf16(got_q, want_q)) << "q of token " << t;
  }
  const KvCacheView host = pool.host_view();
  std::vector<bool> written(static_cast<std::size_t>(pages * 16), false);
  for (int t = 0; t < tokens; ++t) {
    written[static_cast<std::size_t>(slots[static_cast<std::size_t>(t)])] = true;
    for (int kind = 0; kind < 2; ++kind) {
      for (int g = 0; g < kv_heads; ++g) {
        const std::vector<float> got =
            reference::read_kv(host, slots[static_cast<std::size_t>(t)] / 16, kind, g,
                               static_cast<int>(slots[static_cast<std::size_t>(t)] % 16));
        const auto at = static_cast<std::size_t>(t * width + (heads + kind * kv_heads + g) * dim);
        const std::vector<float> expect(want.begin() + static_cast<std::ptrdiff_t>(at),
                                        want.begin() + static_cast<std::ptrdiff_t>(at + dim));
        if (dtype == KvDtype::kBf16) {
          ASSERT_TRUE(near_bf16(got, expect)) << "token " << t << " kind " << kind << " head " << g;
        } else {
          float amax = 0;
          for (float x : expect) amax = std::max(amax, std::abs(x));
          for (int i = 0; i < dim; ++i) {
            const float x = expect[static_cast<std::size_t>(i)];
            const float bound =
                std::ldexp(std::abs(x), -4) + amax / kFp8E4m3Max * std::ldexp(1.0f, -9);
            ASSERT_LE(std::abs(got[static_cast<std::size_t>(i)] - x), bound * 1.001f)
                << "token " << t << " kind " << kind << " head " << g << " dim " << i;
          }
        }
      }
    }
  }
  for (int slot = 0; slot < pages * 16; ++slot) {
    if (written[static_cast<std::size_t>(slot)]) continue;
    for (int kind = 0; kind < 2; ++kind) {
      for (float v : reference::read_kv(host, slot / 16, kind, 0, slot % 16)) ASSERT_EQ(v, 0.0f);
    }
  }
}

TEST(KernelsTest, RopeKvWriteRotatesAndFillsBf16Pages) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  check_rope_kv_write(ops, KvDtype::kBf16);
}

TEST(KernelsTest, RopeKvWriteQuantizesFp8WithinBound) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  check_rope_kv_write(ops, KvDtype::kFp8E4m3);
}

struct AttentionShape {
  int head_dim;
  int group;
  KvDtype dtype;
};

std::string shape_name(const ::testing::TestParamInfo<AttentionShape>& info) {
  return "d" + std::to_string(info.param.head_dim) + "_group" + std::to_string(info.param.group) +
         (info.param.dtype == KvDtype::kBf16 ? "_bf16" : "_fp8");
}

// Runs decode attention for sequences of `contexts` over scattered pages; returns the outputs
// [B, H, D] and the double references.
struct DecodeRun {
  std::vector<float> got;
  std::vector<double> want;
};
DecodeRun run_decode(Ops& ops, const AttentionShape& s, const std::vector<int>& contexts,
                     int splits, std::uint32_t seed, bool contiguous = false) {
  const int kv_heads = 2, heads = kv_heads * s.group, dim = s.head_dim;
  const int seqs = static_cast<int>(contexts.size());
  const int max_context = *std::max_element(contexts.begin(), contexts.end());
  const int pages_each = (max_context + 15) / 16;
  const int pool_pages = seqs * pages_each + 3;
  Pool pool(ops, s.dtype, kv_heads, dim, pool_pages);
  pool.fill_random(ops, seed);
  std::vector<std::int32_t> table = scattered_pages(seqs, pages_each, pool_pages, seed + 1);
  if (contiguous) {
    pool.gather_pages(ops, table);
    std::iota(table.begin(), table.end(), 0);
  }
  // q rows interleaved with rows that are not decode queries, as in a mixed batch.
  const int q_stride = (heads + 2 * kv_heads) * dim;
  const auto q = random_bf16(static_cast<std::size_t>(2 * seqs * q_stride), seed + 2, 1.5f);
  std::vector<std::int32_t> q_rows(static_cast<std::size_t>(seqs));
  for (int b = 0; b < seqs; ++b) q_rows[static_cast<std::size_t>(b)] = 2 * b + 1;
  const std::vector<std::int32_t> lens(contexts.begin(), contexts.end());

  DeviceBuffer<std::uint16_t> d_q(ops, q);
  DeviceBuffer<std::uint16_t> d_out(ops, static_cast<std::size_t>(2 * seqs * heads * dim));
  DeviceBuffer<std::int32_t> d_rows(ops, q_rows);
  DeviceBuffer<std::int32_t> d_lens(ops, lens);
  DeviceBuffer<std::int32_t> d_table(ops, table);
  DeviceBuffer<std::uint8_t> d_workspace(
      ops, decode_attention_workspace_bytes(seqs, heads, dim, splits));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  ops.decode_attention({.q = d_q.get(),
                        .q_row_stride = q_stride,
                        .out = d_out.get(),
                        .out_row_stride = heads * dim,
                        .q_rows = d_rows.get(),
                        .context_lens = d_lens.get(),
                        .page_table = d_table.get(),
                        .page_table_stride = pages_each,
                        .num_seqs = seqs,
                        .num_heads = heads,
                        .cache = pool.view,
                        .softmax_scale = scale,
                        .num_splits = splits,
                        .workspace = d_workspace.get()});
  const std::vector<std::uint16_t> out = d_out.read();
  const KvCacheView host = pool.host_view();
  DecodeRun run;
  for (int b = 0; b < seqs; ++b) {
    for (int h = 0; h < heads; ++h) {
      std::vector<float> qh(static_cast<std::size_t>(dim));
      for (int i = 0; i < dim; ++i) {
        qh[static_cast<std::size_t>(i)] =
            from_bf16(q[static_cast<std::size_t>((2 * b + 1) * q_stride + h * dim + i)]);
      }
      const std::vector<double> ref =
          reference::attend(host, table.data() + b * pages_each, h / s.group, qh.data(),
                            contexts[static_cast<std::size_t>(b)], scale);
      run.want.insert(run.want.end(), ref.begin(), ref.end());
      for (int i = 0; i < dim; ++i) {
        run.got.push_back(
            from_bf16(out[static_cast<std::size_t>((2 * b + 1) * heads * dim + h * dim + i)]));
      }
    }
  }
  return run;
}

class DecodeAttentionTest : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(DecodeAttentionTest, MatchesReferenceWithOneSplitAndMany) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  // Contexts around page edges, and long enough for several warps and splits.
  const std::vector<int> contexts = {1, 15, 16, 17, 100, 257};
  for (int splits : {1, 3}) {
    const DecodeRun run = run_decode(ops, GetParam(), contexts, splits, 11);
    EXPECT_TRUE(near_scaled(run.got, run.want, 8e-3)) << splits << " splits";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionTest,
                         ::testing::Values(AttentionShape{16, 2, KvDtype::kBf16},
                                           AttentionShape{32, 1, KvDtype::kBf16},
                                           AttentionShape{64, 8, KvDtype::kBf16},
                                           AttentionShape{128, 4, KvDtype::kBf16},
                                           AttentionShape{256, 2, KvDtype::kBf16},
                                           AttentionShape{16, 2, KvDtype::kFp8E4m3},
                                           AttentionShape{128, 4, KvDtype::kFp8E4m3},
                                           AttentionShape{256, 8, KvDtype::kFp8E4m3}),
                         shape_name);

TEST(KernelsTest, DecodeAttentionPagedEqualsContiguous) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const AttentionShape shape{64, 4, KvDtype::kBf16};
  // Same seed: the same q, and the same K/V per position, once through scattered pages and once
  // moved into pages 0, 1, 2, ...: the same arithmetic in the same order, so equal bit for bit.
  const DecodeRun scattered = run_decode(ops, shape, {40, 90}, 2, 21);
  const DecodeRun contiguous = run_decode(ops, shape, {40, 90}, 2, 21, /*contiguous=*/true);
  EXPECT_TRUE(near_scaled(scattered.got, scattered.want, 8e-3));
  EXPECT_EQ(scattered.got, contiguous.got);
  EXPECT_EQ(scattered.want, contiguous.want);
}

TEST(KernelsTest, DecodeAttentionSplitCountDoesNotChangeTheResult) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const AttentionShape shape{32, 2, KvDtype::kBf16};
  const DecodeRun one = run_decode(ops, shape, {200, 3}, 1, 31);
  const DecodeRun many = run_decode(ops, shape, {200, 3}, 7, 31);
  std::vector<double> one_as_double(one.got.begin(), one.got.end());
  EXPECT_TRUE(near_scaled(many.got, one_as_double, 8e-3));
}

// FP8 KV against bf16 KV holding the same values: the stated bound on what e4m3 costs.
TEST(KernelsTest, Fp8KvAttentionStaysWithinStatedBoundOfBf16) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const std::vector<int> contexts = {64, 300};
  const DecodeRun bf16 = run_decode(ops, {128, 4, KvDtype::kBf16}, contexts, 2, 41);
  const DecodeRun fp8 = run_decode(ops, {128, 4, KvDtype::kFp8E4m3}, contexts, 2, 41);
  // Bound: 4% of the largest output (3 mantissa bits: each K and V value within 2^-4 of itself).
  std::vector<double> reference_bf16(bf16.got.begin(), bf16.got.end());
  EXPECT_TRUE(near_scaled(fp8.got, reference_bf16, 0.04));
}

TEST(KernelsTest, DecodeAttentionSplitPlanner) {
  // Few long sequences split; many sequences already fill the GPU; short contexts never split
  // below min_split_tokens.
  EXPECT_EQ(decode_attention_splits(1, 8, 32768, 132), 64);
  EXPECT_EQ(decode_attention_splits(64, 8, 32768, 132), 1);
  // 16 x 8 blocks: 4 splits fill the 528 places of one wave; a fifth would start a second.
  EXPECT_EQ(decode_attention_splits(16, 8, 8192, 132), 4);
  EXPECT_EQ(decode_attention_splits(1, 8, 300, 132), 2);
  EXPECT_EQ(decode_attention_splits(1, 8, 100, 132), 1);
  EXPECT_EQ(decode_attention_splits(1, 8, 8192, 132), 64);
  EXPECT_EQ(decode_attention_workspace_bytes(2, 4, 8, 1), 0u);
  EXPECT_EQ(decode_attention_workspace_bytes(2, 4, 8, 3), 2u * 4 * 3 * 9 * sizeof(float));
}

// Prefill: chunks of new tokens over cached prefixes of several lengths.
struct PrefillRun {
  std::vector<float> got;
  std::vector<double> want;
};
PrefillRun run_prefill(Ops& ops, const AttentionShape& s, const std::vector<int>& starts,
                       const std::vector<int>& news, std::uint32_t seed) {
  const int kv_heads = 2, heads = kv_heads * s.group, dim = s.head_dim;
  const int seqs = static_cast<int>(starts.size());
  int max_end = 0, total_new = 0;
  for (int i = 0; i < seqs; ++i) {
    max_end =
        std::max(max_end, starts[static_cast<std::size_t>(i)] + news[static_cast<std::size_t>(i)]);
    total_new += news[static_cast<std::size_t>(i)];
  }
  const int pages_each = (max_end + 15) / 16;
  const int pool_pages = seqs * pages_each;
  Pool pool(ops, s.dtype, kv_heads, dim, pool_pages);
  pool.fill_random(ops, seed);
  const std::vector<std::int32_t> table = scattered_pages(seqs, pages_each, pool_pages, seed + 1);
  const int q_stride = heads * dim;
  const auto q = random_bf16(static_cast<std::size_t>(total_new * q_stride), seed + 2, 1.5f);
  std::vector<std::int32_t> q_start, num_new, start_pos, tiles;
  int row = 0;
  for (int i = 0; i < seqs; ++i) {
    q_start.push_back(row);
    num_new.push_back(news[static_cast<std::size_t>(i)]);
    start_pos.push_back(starts[static_cast<std::size_t>(i)]);
    for (int t = 0; t < news[static_cast<std::size_t>(i)]; t += kPrefillQueryTile) {
      tiles.push_back(i);
      tiles.push_back(t);
    }
    row += news[static_cast<std::size_t>(i)];
  }
  DeviceBuffer<std::uint16_t> d_q(ops, q);
  DeviceBuffer<std::uint16_t> d_out(ops, q.size());
  DeviceBuffer<std::int32_t> d_tiles(ops, tiles), d_start(ops, q_start), d_new(ops, num_new),
      d_pos(ops, start_pos), d_table(ops, table);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  ops.prefill_attention({.q = d_q.get(),
                         .q_row_stride = q_stride,
                         .out = d_out.get(),
                         .out_row_stride = q_stride,
                         .tiles = d_tiles.get(),
                         .q_start_rows = d_start.get(),
                         .num_new = d_new.get(),
                         .start_positions = d_pos.get(),
                         .page_table = d_table.get(),
                         .page_table_stride = pages_each,
                         .num_tiles = static_cast<int>(tiles.size() / 2),
                         .num_heads = heads,
                         .cache = pool.view,
                         .softmax_scale = scale});
  const std::vector<std::uint16_t> out = d_out.read();
  const KvCacheView host = pool.host_view();
  PrefillRun run;
  for (int i = 0; i < seqs; ++i) {
    for (int t = 0; t < news[static_cast<std::size_t>(i)]; ++t) {
      const int r = q_start[static_cast<std::size_t>(i)] + t;
      for (int h = 0; h < heads; ++h) {
        std::vector<float> qh(static_cast<std::size_t>(dim));
        for (int d = 0; d < dim; ++d) {
          qh[static_cast<std::size_t>(d)] =
              from_bf16(q[static_cast<std::size_t>(r * q_stride + h * dim + d)]);
        }
        const std::vector<double> ref =
            reference::attend(host, table.data() + i * pages_each, h / s.group, qh.data(),
                              starts[static_cast<std::size_t>(i)] + t + 1, scale);
        run.want.insert(run.want.end(), ref.begin(), ref.end());
        for (int d = 0; d < dim; ++d) {
          run.got.push_back(from_bf16(out[static_cast<std::size_t>(r * q_stride + h * dim + d)]));
        }
      }
    }
  }
  return run;
}

class PrefillAttentionTest : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(PrefillAttentionTest, MatchesReferenceOverCachedPrefixes) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  // A cold prompt, a chunk after a 20-token prefix (spanning a page edge and two query tiles),
  // one token after a long prefix, a chunk starting on a page boundary.
  const PrefillRun run = run_prefill(ops, GetParam(), {0, 20, 150, 32}, {37, 40, 1, 16}, 51);
  EXPECT_TRUE(near_scaled(run.got, run.want, 8e-3));
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillAttentionTest,
                         ::testing::Values(AttentionShape{16, 2, KvDtype::kBf16},
                                           AttentionShape{32, 4, KvDtype::kBf16},
                                           AttentionShape{128, 4, KvDtype::kBf16},
                                           AttentionShape{256, 1, KvDtype::kBf16},
                                           AttentionShape{64, 2, KvDtype::kFp8E4m3}),
                         shape_name);

TEST(KernelsTest, ArgmaxTakesLowestIndexOnTiesAndNeverNan) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const int vocab = 1000;
  std::vector<float> logits = random_floats(4 * vocab, 61);
  logits[0 * vocab + 700] = 5;  // row 0: a clear winner
  logits[1 * vocab + 900] = 5;  // row 1: a tie, the lower index wins
  logits[1 * vocab + 300] = 5;
  logits[2 * vocab + 10] = NAN;  // row 2: NaN loses to everything
  logits[2 * vocab + 11] = 4;
  for (int i = 0; i < vocab; ++i) logits[static_cast<std::size_t>(3 * vocab + i)] = -INFINITY;
  DeviceBuffer<float> d_logits(ops, logits);
  DeviceBuffer<std::int32_t> d_out(ops, 4);
  ops.argmax({.logits = d_logits.get(), .out = d_out.get(), .rows = 4, .vocab = vocab});
  EXPECT_EQ(d_out.read(), (std::vector<std::int32_t>{700, 300, 11, 0}));
}

TEST(KernelsTest, FillRandomMatchesHostBitForBit) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  const std::size_t n = 5000;
  DeviceBuffer<float> d_f32(ops, n);
  DeviceBuffer<std::uint16_t> d_bf16(ops, n);
  ops.fill_random({.f32_out = d_f32.get(), .count = n, .seed = 9, .scale = 0.5f, .offset = 1});
  ops.fill_random({.bf16_out = d_bf16.get(), .count = n, .seed = 9, .scale = 0.5f, .offset = 1});
  const std::vector<float> f32 = d_f32.read();
  const std::vector<std::uint16_t> bf16 = d_bf16.read();
  for (std::size_t i = 0; i < n; ++i) {
    const float want = fill_random_value(9, i, 0.5f, 1);
    ASSERT_EQ(f32[i], want);
    ASSERT_EQ(bf16[i], to_bf16(want));
    ASSERT_GE(want, 0.5f);
    ASSERT_LT(want, 1.5f);
  }
}

TEST(KernelsTest, GemmMatchesFp32Reference) {
  PREFIXGATE_OPS_OR_SKIP(ops);
  for (int rows : {1, 7, 64}) {
    const int in = 96, out = 80;
    const auto x = random_bf16(static_cast<std::size_t>(rows * in), 71);
    const auto w = random_bf16(static_cast<std::size_t>(out * in), 72);
    DeviceBuffer<std::uint16_t> d_x(ops, x), d_w(ops, w);
    DeviceBuffer<float> d_y32(ops, static_cast<std::size_t>(rows * out));
    DeviceBuffer<std::uint16_t> d_y16(ops, static_cast<std::size_t>(rows * out));
    ops.gemm({.x = d_x.get(),
              .w = d_w.get(),
              .y = d_y32.get(),
              .y_fp32 = true,
              .rows = rows,
              .in = in,
              .out = out});
    ops.gemm(
        {.x = d_x.get(), .w = d_w.get(), .y = d_y16.get(), .rows = rows, .in = in, .out = out});
    std::vector<double> want(static_cast<std::size_t>(rows * out), 0.0);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double sum = 0;
        for (int i = 0; i < in; ++i) {
          sum += static_cast<double>(from_bf16(x[static_cast<std::size_t>(r * in + i)])) *
                 from_bf16(w[static_cast<std::size_t>(o * in + i)]);
        }
        want[static_cast<std::size_t>(r * out + o)] = sum;
      }
    }
    EXPECT_TRUE(near_scaled(d_y32.read(), want, 1e-3)) << rows << " rows, fp32 out";
    EXPECT_TRUE(near_scaled(reference::widen(d_y16.read()), want, 8e-3)) << rows << " rows, bf16";
  }
}

}  // namespace
}  // namespace prefixgate::kernels
