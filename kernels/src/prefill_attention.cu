// Paged prefill attention over a cached prefix: a chunk of new tokens attends, causally, to
// every earlier position of its sequence (the cached prefix pages plus the chunk itself, whose
// K/V rope_kv_write has just stored), tiled over keys with an online softmax (FlashAttention's
// recurrence, on CUDA cores).
//
// Grid (num_tiles, H), 128 threads: a tile is kPrefillQueryTile = 32 query tokens of one
// sequence and one query head; 4 threads share a query row, thread c holding dims c, c + 4, ...
// (interleaved, so that the 4 read different shared-memory banks). Keys go through shared
// memory KEYS at a time, converted to fp32 once for all 32 rows.
#include "kv_cache.cuh"

namespace prefixgate::kernels::PG_NS {
namespace {

constexpr int kThreads = 128;
constexpr int kRowThreads = 4;
static_assert(kThreads == kPrefillQueryTile * kRowThreads);

template <class CacheT, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(PrefillAttentionParams p) {
  constexpr int KEYS = 4096 / D;  // keys per shared-memory tile: 32 KB of K and V in fp32
  constexpr int PER = D / kRowThreads;
  const int tile = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int seq = p.tiles[2 * tile];
  const int first = p.tiles[2 * tile + 1];
  const int num_new = p.num_new[seq];
  const int start = p.start_positions[seq];
  const KvCacheView& c = p.cache;
  const int g = h / (p.num_heads / c.num_kv_heads);
  const int row = first + static_cast<int>(threadIdx.x) / kRowThreads;
  const int part = static_cast<int>(threadIdx.x) % kRowThreads;
  const bool row_valid = row < num_new;
  const int position = start + row;  // sees keys [0, position]
  const int last_row = first + kPrefillQueryTile < num_new ? first + kPrefillQueryTile : num_new;
  const int keys_end = start + last_row;  // the tile sees keys [0, keys_end)

  float q[PER];
  const float q_scale = p.softmax_scale * kLog2e;
  const std::uint16_t* qh =
      p.q +
      static_cast<std::int64_t>(p.q_start_rows[seq] + (row_valid ? row : first)) * p.q_row_stride +
      static_cast<std::int64_t>(h) * D;
#pragma unroll
  for (int j = 0; j < PER; ++j) q[j] = bf16_to_float(qh[part + kRowThreads * j]) * q_scale;

  float m = kNegInf;
  float l = 0;
  float acc[PER] = {};
  __shared__ float keys[KEYS][D];
  __shared__ float values[KEYS][D];
  const std::int32_t* table = p.page_table + static_cast<std::int64_t>(seq) * p.page_table_stride;
  const auto* cache = static_cast<const CacheT*>(c.data);

  for (int k0 = 0; k0 < keys_end; k0 += KEYS) {
    // Load keys [k0, k0 + KEYS) of this head, dims contiguous per key.
    for (int e = static_cast<int>(threadIdx.x); e < KEYS * D; e += kThreads) {
      const int k = e / D;
      const int dim = e % D;
      const int t = k0 + k;
      float kv = 0;
      float vv = 0;
      if (t < keys_end) {
        const std::int64_t page = table[t / c.page_tokens];
        const int s = t % c.page_tokens;
        const CacheT kb = cache[kv_offset(c, page, 0, g, s) + dim];
        const CacheT vb = cache[kv_offset(c, page, 1, g, s) + dim];
        if constexpr (sizeof(CacheT) == 1) {
          kv = fp8_to_float(kb) * c.scales[kv_scale_offset(c, page, 0, g, s)];
          vv = fp8_to_float(vb) * c.scales[kv_scale_offset(c, page, 1, g, s)];
        } else {
          kv = bf16_to_float(kb);
          vv = bf16_to_float(vb);
        }
      }
      keys[k][dim] = kv;
      values[k][dim] = vv;
    }
    __syncthreads();
    const int count = keys_end - k0 < KEYS ? keys_end - k0 : KEYS;
    for (int k = 0; k < count; ++k) {
      float dot = 0;
#pragma unroll
      for (int j = 0; j < PER; ++j) dot += q[j] * keys[k][part + kRowThreads * j];
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      if (!row_valid || k0 + k > position) continue;
      const float m_new = fmaxf(m, dot);
      const float alpha = exp2f(m - m_new);
      const float weight = exp2f(dot - m_new);
      m = m_new;
      l = l * alpha + weight;
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        acc[j] = acc[j] * alpha + weight * values[k][part + kRowThreads * j];
      }
    }
    __syncthreads();
  }
  if (!row_valid) return;
  std::uint16_t* out = p.out +
                       static_cast<std::int64_t>(p.q_start_rows[seq] + row) * p.out_row_stride +
                       static_cast<std::int64_t>(h) * D;
  const float inv = 1.0f / l;  // l >= 1: a row always sees its own key
#pragma unroll
  for (int j = 0; j < PER; ++j) out[part + kRowThreads * j] = float_to_bf16(acc[j] * inv);
}

template <class CacheT, int D>
void launch(const PrefillAttentionParams& p, void* stream) {
  auto* kernel = &prefill_kernel<CacheT, D>;
  PG_LAUNCH(kernel, dim3(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_heads)),
            dim3(kThreads), 0, stream, p);
}

template <class CacheT>
void dispatch_dim(const PrefillAttentionParams& p, void* stream) {
  switch (p.cache.head_dim) {
    case 16: return launch<CacheT, 16>(p, stream);
    case 32: return launch<CacheT, 32>(p, stream);
    case 64: return launch<CacheT, 64>(p, stream);
    case 128: return launch<CacheT, 128>(p, stream);
    case 256: return launch<CacheT, 256>(p, stream);
    default: unsupported_shape("prefill attention: head_dim must be 16, 32, 64, 128 or 256");
  }
}

}  // namespace

void prefill_attention(const PrefillAttentionParams& p, void* stream) {
  if (p.num_tiles == 0) return;
  if (p.cache.dtype == KvDtype::kBf16) {
    dispatch_dim<std::uint16_t>(p, stream);
  } else {
    dispatch_dim<std::uint8_t>(p, stream);
  }
}

}  // namespace prefixgate::kernels::PG_NS
