// Paged prefill attention over a cached prefix, on tensor cores: a chunk of new tokens attends,
// causally, to every earlier position of its sequence (the cached prefix pages plus the chunk
// itself, whose K/V rope_kv_write has just stored). FlashAttention's recurrence: key tiles
// through shared memory, an online softmax, the output rescaled as the running max grows.
//
// Grid (num_tiles, H), 4 warps: a tile is kPrefillQueryTile = 64 query tokens of one sequence
// and one query head, 16 rows per warp. Per key tile of KEYS = 32 keys:
//   S = Q K^T       wmma bf16 16x16x16, fp32 accumulate, each warp its 16 rows -> shared
//   P = softmax     two lanes per row: mask, running max and sum, rescale the row of O
//   O += P V        wmma, O kept in shared memory (fp32) since a fragment's layout is opaque
// Shared memory (dynamic): Q [64, D] bf16, K and V [32, D] bf16, S [64, 32] fp32,
// P [64, 32] bf16, O [64, D] fp32: 76 KB at D = 128, 140 KB at D = 256.
#include "kv_cache.cuh"

#if defined(PREFIXGATE_KERNELS_EMU)
#include "emu/cuda_emu_wmma.h"
#else
#include <mma.h>
#endif

namespace prefixgate::kernels::PG_NS {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = kPrefillQueryTile;  // 64
constexpr int kKeys = 32;
static_assert(kRows == 16 * kWarps);

// Byte offsets of the shared-memory arrays.
template <int D>
struct Layout {
  static constexpr int q = 0;                      // bf16 [kRows, D]
  static constexpr int k = q + kRows * D * 2;      // bf16 [kKeys, D]
  static constexpr int v = k + kKeys * D * 2;      // bf16 [kKeys, D]
  static constexpr int s = v + kKeys * D * 2;      // fp32 [kRows, kKeys]
  static constexpr int p = s + kRows * kKeys * 4;  // bf16 [kRows, kKeys]
  static constexpr int o = p + kRows * kKeys * 2;  // fp32 [kRows, D]
  static constexpr int bytes = o + kRows * D * 4;
};

// 8 bf16 values as 16 bytes.
__device__ __forceinline__ uint4 pack_bf16(const float (&v)[8]) {
  std::uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] =
        std::uint32_t{float_to_bf16(v[2 * i])} | (std::uint32_t{float_to_bf16(v[2 * i + 1])} << 16);
  }
  return uint4{w[0], w[1], w[2], w[3]};
}

// 16 bytes of cache values into shared memory as bf16: bf16 as they are; e4m3 (16 values)
// dequantized by their row's scale into 32 bytes.
template <class CacheT>
__device__ __forceinline__ void store_bf16(__nv_bfloat16* dst, const uint4& bits, float scale) {
  if constexpr (sizeof(CacheT) == 2) {
    *reinterpret_cast<uint4*>(dst) = bits;
  } else {
    float values[16];
    unpack(bits, values);
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      float eight[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) eight[i] = values[part * 8 + i] * scale;
      *reinterpret_cast<uint4*>(dst + part * 8) = pack_bf16(eight);
    }
  }
}

template <class CacheT, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(PrefillAttentionParams p) {
  using L = Layout<D>;
#if defined(PREFIXGATE_KERNELS_EMU)
  auto* smem = static_cast<unsigned char*>(emu_rt::dynamic_shared());
#else
  extern __shared__ __align__(128) unsigned char smem[];  // wmma wants 32-byte alignment
#endif
  auto* q_s = reinterpret_cast<__nv_bfloat16*>(smem + L::q);
  auto* k_s = reinterpret_cast<__nv_bfloat16*>(smem + L::k);
  auto* v_s = reinterpret_cast<__nv_bfloat16*>(smem + L::v);
  auto* s_s = reinterpret_cast<float*>(smem + L::s);
  auto* p_s = reinterpret_cast<__nv_bfloat16*>(smem + L::p);
  auto* o_s = reinterpret_cast<float*>(smem + L::o);

  const int tile = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int seq = p.tiles[2 * tile];
  const int first = p.tiles[2 * tile + 1];
  const int num_new = p.num_new[seq];
  const int start = p.start_positions[seq];
  const KvCacheView& c = p.cache;
  const int g = h / (p.num_heads / c.num_kv_heads);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int rows_valid = num_new - first < kRows ? num_new - first : kRows;
  const int keys_end = start + first + rows_valid;  // the tile sees keys [0, keys_end)

  // Q rows (zeros past the chunk) and O = 0.
  constexpr int kVec = 8;  // bf16 per 16 bytes
  for (int e = tid; e < kRows * D / kVec; e += kThreads) {
    const int r = e / (D / kVec);
    const int d = e % (D / kVec) * kVec;
    uint4 bits{0, 0, 0, 0};
    if (r < rows_valid) {
      bits = *reinterpret_cast<const uint4*>(
          p.q + static_cast<std::int64_t>(p.q_start_rows[seq] + first + r) * p.q_row_stride +
          static_cast<std::int64_t>(h) * D + d);
    }
    *reinterpret_cast<uint4*>(q_s + r * D + d) = bits;
  }
  for (int e = tid; e < kRows * D; e += kThreads) o_s[e] = 0;

  // Row state: lanes 2i and 2i + 1 of a warp share row warp * 16 + i, columns [16 half, +16).
  const int row = warp * 16 + lane / 2;
  const int half = lane % 2;
  const bool row_valid = row < rows_valid;
  const int position = start + first + row;  // the row sees keys [0, position]
  float m = kNegInf;
  float l = 0;
  const float scale = p.softmax_scale * kLog2e;
  const std::int32_t* table = p.page_table + static_cast<std::int64_t>(seq) * p.page_table_stride;
  const auto* cache = static_cast<const CacheT*>(c.data);
  __syncthreads();

  for (int k0 = 0; k0 < keys_end; k0 += kKeys) {
    // K and V of keys [k0, k0 + kKeys) as bf16 (fp8 dequantized), zeros past the end (zero
    // bits are 0 in both formats).
    constexpr int kCacheVec = 16 / static_cast<int>(sizeof(CacheT));
    for (int e = tid; e < kKeys * D / kCacheVec; e += kThreads) {
      const int key = e / (D / kCacheVec);
      const int d = e % (D / kCacheVec) * kCacheVec;
      const int t = k0 + key;
      uint4 kb{0, 0, 0, 0};
      uint4 vb{0, 0, 0, 0};
      float k_scale = 0;
      float v_scale = 0;
      if (t < keys_end) {
        const std::int64_t page = table[t / c.page_tokens];
        const int s = t % c.page_tokens;
        kb = *reinterpret_cast<const uint4*>(cache + kv_offset(c, page, 0, g, s) + d);
        vb = *reinterpret_cast<const uint4*>(cache + kv_offset(c, page, 1, g, s) + d);
        if constexpr (sizeof(CacheT) == 1) {
          k_scale = c.scales[kv_scale_offset(c, page, 0, g, s)];
          v_scale = c.scales[kv_scale_offset(c, page, 1, g, s)];
        }
      }
      store_bf16<CacheT>(k_s + key * D + d, kb, k_scale);
      store_bf16<CacheT>(v_s + key * D + d, vb, v_scale);
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows: [16, kKeys].
#pragma unroll
    for (int n = 0; n < kKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, q_s + warp * 16 * D + kk * 16, D);
        wmma::load_matrix_sync(b, k_s + n * 16 * D + kk * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(s_s + warp * 16 * kKeys + n * 16, acc, kKeys, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of the row's 16 columns of this tile, with its partner lane's 16.
    float tile_max = kNegInf;
    float sv[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int key = k0 + half * 16 + j;
      const bool visible = row_valid && key <= position;
      sv[j] = visible ? s_s[row * kKeys + half * 16 + j] * scale : kNegInf;
      tile_max = fmaxf(tile_max, sv[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    // m_new = -inf: nothing visible yet (a padding row); keep O and l at zero.
    const float alpha = m_new == kNegInf ? 1.0f : exp2f(m - m_new);
    float sum = 0;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float e = sv[j] == kNegInf ? 0.0f : exp2f(sv[j] - m_new);
      const std::uint16_t bits = float_to_bf16(e);
      sum += bf16_to_float(bits);  // the sum of what P V multiplies
      reinterpret_cast<std::uint16_t*>(p_s)[row * kKeys + half * 16 + j] = bits;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) o_s[row * D + d] *= alpha;
    __syncwarp();

    // O += P V for this warp's rows: [16, kKeys] x [kKeys, D].
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_s + warp * 16 * D + n * 16, D, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, p_s + warp * 16 * kKeys + kk * 16, kKeys);
        wmma::load_matrix_sync(b, v_s + kk * 16 * D + n * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(o_s + warp * 16 * D + n * 16, acc, D, wmma::mem_row_major);
    }
    __syncthreads();  // K, V (and S, P) are overwritten by the next tile
  }

  if (!row_valid) return;
  std::uint16_t* out =
      p.out + static_cast<std::int64_t>(p.q_start_rows[seq] + first + row) * p.out_row_stride +
      static_cast<std::int64_t>(h) * D;
  const float inv = 1.0f / l;  // l >= 1: a row always sees its own key
  for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d)
    out[d] = float_to_bf16(o_s[row * D + d] * inv);
}

template <class CacheT, int D>
void launch(const PrefillAttentionParams& p, void* stream) {
  auto* kernel = &prefill_kernel<CacheT, D>;
  constexpr int bytes = Layout<D>::bytes;
#if !defined(PREFIXGATE_KERNELS_EMU)
  // Over 48 KB of dynamic shared memory needs an opt-in, once per kernel.
  static const bool opted_in = [&] {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return true;
  }();
  (void)opted_in;
#endif
  PG_LAUNCH(kernel, dim3(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.num_heads)),
            dim3(kThreads), bytes, stream, p);
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
