// The small kernels of a layer: embedding gather, RMSNorm fused with the residual add,
// SiLU-and-mul, the RoPE table, argmax and generated weights. Each is memory-bound and simple;
// their CPU references are in tests/kernels/reference.cpp.
#include "common.cuh"

namespace prefixgate::kernels::PG_NS {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t count, int threads, int cap = 65535) {
  const std::size_t blocks = (count + static_cast<std::size_t>(threads) - 1) / threads;
  return static_cast<int>(blocks < static_cast<std::size_t>(cap) ? (blocks > 0 ? blocks : 1) : cap);
}

// One block per token: out[t, :] = table[id, :].
__global__ void embedding_kernel(EmbeddingParams p) {
  const int t = static_cast<int>(blockIdx.x);
  const std::uint16_t* row = p.table + static_cast<std::int64_t>(p.token_ids[t]) * p.hidden;
  float* out = p.out + static_cast<std::int64_t>(t) * p.hidden;
  for (int i = static_cast<int>(threadIdx.x); i < p.hidden; i += static_cast<int>(blockDim.x)) {
    out[i] = bf16_to_float(row[i]);
  }
}

// One block per output row. Rows of up to kThreads * kNormPerThread dims (Llama-3-8B's 4096)
// stay in registers: every load of the row (residual, addend, weights) is issued before the
// first is needed, so a row costs about one memory latency, not one per stride of the block.
// Longer rows take the loop, reading the residual again for the output (it is in L1/L2).
constexpr int kNormPerThread = 16;
__global__ void rms_norm_kernel(RmsNormParams p) {
  const int i = static_cast<int>(blockIdx.x);
  const int r = p.rows_index != nullptr ? p.rows_index[i] : i;
  const int tid = static_cast<int>(threadIdx.x);
  const int step = static_cast<int>(blockDim.x);
  float* x = p.residual + static_cast<std::int64_t>(r) * p.dim;
  const float* add = p.add != nullptr ? p.add + static_cast<std::int64_t>(r) * p.dim : nullptr;
  std::uint16_t* out = p.out + static_cast<std::int64_t>(i) * p.dim;
  float sum_sq = 0;
  if (p.dim <= step * kNormPerThread) {
    float v[kNormPerThread];
    float w[kNormPerThread];
#pragma unroll
    for (int k = 0; k < kNormPerThread; ++k) {
      const int j = tid + k * step;
      v[k] = j < p.dim ? x[j] : 0.0f;
      if (add != nullptr && j < p.dim) v[k] += add[j];
      w[k] = j < p.dim ? p.weight[j] : 0.0f;
      sum_sq += v[k] * v[k];
    }
    if (add != nullptr) {
#pragma unroll
      for (int k = 0; k < kNormPerThread; ++k) {
        if (tid + k * step < p.dim) x[tid + k * step] = v[k];
      }
    }
    const float inv_rms = rsqrtf(block_sum(sum_sq) / static_cast<float>(p.dim) + p.eps);
#pragma unroll
    for (int k = 0; k < kNormPerThread; ++k) {
      if (tid + k * step < p.dim) out[tid + k * step] = float_to_bf16(v[k] * inv_rms * w[k]);
    }
    return;
  }
  for (int j = tid; j < p.dim; j += step) {
    float v = x[j];
    if (add != nullptr) {
      v += add[j];
      x[j] = v;
    }
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq) / static_cast<float>(p.dim) + p.eps);
  for (int j = tid; j < p.dim; j += step) {
    out[j] = float_to_bf16(x[j] * inv_rms * p.weight[j]);
  }
}

__global__ void silu_mul_kernel(SiluMulParams p) {
  const std::int64_t n = static_cast<std::int64_t>(p.rows) * p.inter;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = k / p.inter;
    const std::int64_t col = k % p.inter;
    const std::uint16_t* in = p.gate_up + row * 2 * p.inter;
    const float g = bf16_to_float(in[col]);
    const float u = bf16_to_float(in[p.inter + col]);
    p.out[k] = float_to_bf16(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void rope_table_kernel(RopeTableParams p) {
  const std::int64_t n = static_cast<std::int64_t>(p.num_tokens) * p.half_dim;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = k / p.half_dim;
    const std::int64_t j = k % p.half_dim;
    const double angle = static_cast<double>(p.positions[t]) * p.inv_freq[j];
    p.cos[k] = static_cast<float>(cos(angle));
    p.sin[k] = static_cast<float>(sin(angle));
  }
}

// One block per row: the lowest index of the largest value, NaN as -inf.
__global__ void argmax_kernel(ArgmaxParams p) {
  const float* row = p.logits + static_cast<std::int64_t>(blockIdx.x) * p.vocab;
  float best = kNegInf;
  int best_index = 0x7fffffff;
  // Unrolled, so that several loads of the row are in flight per thread.
#pragma unroll 8
  for (int i = static_cast<int>(threadIdx.x); i < p.vocab; i += static_cast<int>(blockDim.x)) {
    float v = row[i];
    if (v != v) v = kNegInf;
    if (v > best || (v == best && i < best_index)) {
      best = v;
      best_index = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other > best || (other == best && other_index < best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  __shared__ float warp_best[32];
  __shared__ int warp_index[32];
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) {
    warp_best[warp] = best;
    warp_index[warp] = best_index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      if (warp_best[w] > best || (warp_best[w] == best && warp_index[w] < best_index)) {
        best = warp_best[w];
        best_index = warp_index[w];
      }
    }
    p.out[blockIdx.x] = best_index;
  }
}

__global__ void fill_random_kernel(FillRandomParams p) {
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < p.count;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = random_value(p.seed, k, p.scale, p.offset);
    if (p.bf16_out != nullptr) {
      p.bf16_out[k] = float_to_bf16(v);
    } else {
      p.f32_out[k] = v;
    }
  }
}

}  // namespace

void embedding(const EmbeddingParams& p, void* stream) {
  if (p.num_tokens == 0) return;
  PG_LAUNCH(embedding_kernel, dim3(static_cast<unsigned>(p.num_tokens)), dim3(kThreads), 0, stream,
            p);
}

void rms_norm(const RmsNormParams& p, void* stream) {
  if (p.rows == 0) return;
  PG_LAUNCH(rms_norm_kernel, dim3(static_cast<unsigned>(p.rows)), dim3(kThreads), 0, stream, p);
}

void silu_mul(const SiluMulParams& p, void* stream) {
  const std::size_t n = static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(p.inter);
  if (n == 0) return;
  PG_LAUNCH(silu_mul_kernel, dim3(static_cast<unsigned>(blocks_for(n, kThreads, 4096))),
            dim3(kThreads), 0, stream, p);
}

void rope_table(const RopeTableParams& p, void* stream) {
  const std::size_t n =
      static_cast<std::size_t>(p.num_tokens) * static_cast<std::size_t>(p.half_dim);
  if (n == 0) return;
  PG_LAUNCH(rope_table_kernel, dim3(static_cast<unsigned>(blocks_for(n, kThreads, 4096))),
            dim3(kThreads), 0, stream, p);
}

void argmax(const ArgmaxParams& p, void* stream) {
  if (p.rows == 0) return;
  PG_LAUNCH(argmax_kernel, dim3(static_cast<unsigned>(p.rows)), dim3(1024), 0, stream, p);
}

void fill_random(const FillRandomParams& p, void* stream) {
  if (p.count == 0) return;
  PG_LAUNCH(fill_random_kernel, dim3(static_cast<unsigned>(blocks_for(p.count, kThreads, 8192))),
            dim3(kThreads), 0, stream, p);
}

}  // namespace prefixgate::kernels::PG_NS
