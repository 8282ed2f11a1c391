// Paged decode attention for grouped-query attention, split over the context (flash-decoding).
//
// Grid (num_splits, G, B), 128 threads. A block reads one KV head's K and V over its split of
// one sequence's context exactly once, for all GROUP = H / G query heads that share that head.
// Within a warp, LANES = D / VEC lanes cover one token's head_dim with one 16-byte load each
// (VEC = 8 bf16 or 16 e4m3 values), so a warp covers 32 / LANES tokens per step and every load
// of a page's [P, D] block is contiguous. Each lane group keeps its own online-softmax state
// (max, sum, accumulator) over the tokens it sees; the states merge by log-sum-exp across the
// warp (shuffles), across the block's warps (shared memory) and, when num_splits > 1, across
// splits (decode_merge_kernel over the workspace). Scores are in base 2 (q is prescaled by
// softmax_scale * log2(e)), so exponentials are exp2.
#include <algorithm>

#include "kv_cache.cuh"

namespace prefixgate::kernels::PG_NS {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// Online-softmax state of one query head over some keys: m (running max, base 2), l (sum of
// 2^(s - m)), acc (sum of 2^(s - m) * v over this lane's VEC dims).
template <int VEC>
struct Partial {
  float m = kNegInf;
  float l = 0;
  float acc[VEC] = {};
};

// a := merge(a, b), either may be empty (m = -inf).
template <int VEC>
__device__ __forceinline__ void merge(Partial<VEC>& a, float bm, float bl,
                                      const float (&bacc)[VEC]) {
  const float m = fmaxf(a.m, bm);
  if (m == kNegInf) return;
  const float wa = a.m == kNegInf ? 0.0f : exp2f(a.m - m);
  const float wb = bm == kNegInf ? 0.0f : exp2f(bm - m);
  a.m = m;
  a.l = a.l * wa + bl * wb;
#pragma unroll
  for (int v = 0; v < VEC; ++v) a.acc[v] = a.acc[v] * wa + bacc[v] * wb;
}

template <class CacheT, int D, int GROUP>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeAttentionParams p) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(CacheT));
  constexpr int LANES = D / VEC;      // lanes per token
  constexpr int TOKENS = 32 / LANES;  // tokens per warp step
  static_assert(LANES >= 1 && LANES <= 32 && D % VEC == 0, "head_dim fits a warp");

  const int split = static_cast<int>(blockIdx.x);
  const int g = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int slot = lane / LANES;   // which token of the warp step
  const int chunk = lane % LANES;  // which VEC dims
  const KvCacheView& c = p.cache;

  const int context = p.context_lens[b];
  const int per_split = (context + p.num_splits - 1) / p.num_splits;
  const int begin = split * per_split;
  const int end = begin + per_split < context ? begin + per_split : context;

  // This lane's slice of each query head, prescaled into base 2.
  float q[GROUP][VEC];
  const float q_scale = p.softmax_scale * kLog2e;
#pragma unroll
  for (int gi = 0; gi < GROUP; ++gi) {
    const std::uint16_t* qh = p.q + static_cast<std::int64_t>(p.q_rows[b]) * p.q_row_stride +
                              static_cast<std::int64_t>(g * GROUP + gi) * D + chunk * VEC;
#pragma unroll
    for (int v = 0; v < VEC; ++v) q[gi][v] = bf16_to_float(qh[v]) * q_scale;
  }

  Partial<VEC> state[GROUP];
  const std::int32_t* table = p.page_table + static_cast<std::int64_t>(b) * p.page_table_stride;
  const auto* cache = static_cast<const CacheT*>(c.data);
  // The raw K/V bits (and fp8 scales) of token t, zeros past the end.
  struct Loaded {
    uint4 k = {0, 0, 0, 0};
    uint4 v = {0, 0, 0, 0};
    float k_scale = 1;
    float v_scale = 1;
  };
  const auto load = [&](int t) {
    Loaded r;
    if (t < end) {
      const std::int64_t page = table[t / c.page_tokens];
      const int s = t % c.page_tokens;
      r.k = *reinterpret_cast<const uint4*>(cache + kv_offset(c, page, 0, g, s) + chunk * VEC);
      r.v = *reinterpret_cast<const uint4*>(cache + kv_offset(c, page, 1, g, s) + chunk * VEC);
      if constexpr (sizeof(CacheT) == 1) {
        r.k_scale = c.scales[kv_scale_offset(c, page, 0, g, s)];
        r.v_scale = c.scales[kv_scale_offset(c, page, 1, g, s)];
      }
    }
    return r;
  };
  // Software pipelining: the next step's loads are issued before this step's arithmetic, so
  // each lane keeps two 16-byte K and V loads in flight (decode is bound by memory latency
  // times bytes in flight).
  constexpr int kStride = kWarps * TOKENS;
  Loaded next = load(begin + warp * TOKENS + slot);
  // Warp-uniform loop bound: every lane takes part in each step's shuffles.
  for (int base = begin + warp * TOKENS; base < end; base += kStride) {
    const int t = base + slot;
    const bool valid = t < end;
    const Loaded current = next;
    if (base + kStride < end) next = load(t + kStride);
    float k[VEC];
    float v[VEC];
    unpack(current.k, k);
    unpack(current.v, v);
    const float k_scale = current.k_scale;
    const float v_scale = current.v_scale;
#pragma unroll
    for (int gi = 0; gi < GROUP; ++gi) {
      float dot = 0;
#pragma unroll
      for (int i = 0; i < VEC; ++i) dot += q[gi][i] * k[i];
#pragma unroll
      for (int offset = LANES / 2; offset > 0; offset /= 2) {
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      }
      if (!valid) continue;
      const float score = dot * k_scale;
      Partial<VEC>& st = state[gi];
      const float m = fmaxf(st.m, score);
      const float alpha = exp2f(st.m - m);  // st.m = -inf: 0
      const float weight = exp2f(score - m);
      st.m = m;
      st.l = st.l * alpha + weight;
      const float wv = weight * v_scale;
#pragma unroll
      for (int i = 0; i < VEC; ++i) st.acc[i] = st.acc[i] * alpha + wv * v[i];
    }
  }

  // Merge the token slots of the warp: lanes with the same chunk, LANES apart.
#pragma unroll
  for (int gi = 0; gi < GROUP; ++gi) {
    for (int offset = LANES; offset < 32; offset *= 2) {
      const float om = __shfl_xor_sync(0xffffffffu, state[gi].m, offset);
      const float ol = __shfl_xor_sync(0xffffffffu, state[gi].l, offset);
      float oacc[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        oacc[i] = __shfl_xor_sync(0xffffffffu, state[gi].acc[i], offset);
      merge(state[gi], om, ol, oacc);
    }
  }

  // Merge the warps through shared memory; lanes [0, LANES) of each warp hold its result.
  __shared__ float shared_m[kWarps][GROUP];
  __shared__ float shared_l[kWarps][GROUP];
  __shared__ float shared_acc[kWarps][GROUP][D];
  if (slot == 0) {
#pragma unroll
    for (int gi = 0; gi < GROUP; ++gi) {
      if (chunk == 0) {
        shared_m[warp][gi] = state[gi].m;
        shared_l[warp][gi] = state[gi].l;
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) shared_acc[warp][gi][chunk * VEC + i] = state[gi].acc[i];
    }
  }
  __syncthreads();
  const int heads_out = p.num_heads;
  for (int e = static_cast<int>(threadIdx.x); e < GROUP * D; e += kThreads) {
    const int gi = e / D;
    const int dim = e % D;
    float m = kNegInf;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, shared_m[w][gi]);
    float l = 0;
    float acc = 0;
    if (m != kNegInf) {
      for (int w = 0; w < kWarps; ++w) {
        if (shared_m[w][gi] == kNegInf) continue;
        const float weight = exp2f(shared_m[w][gi] - m);
        l += shared_l[w][gi] * weight;
        acc += shared_acc[w][gi][dim] * weight;
      }
    }
    const int h = g * GROUP + gi;
    if (p.num_splits == 1) {
      p.out[static_cast<std::int64_t>(p.q_rows[b]) * p.out_row_stride +
            static_cast<std::int64_t>(h) * D + dim] = float_to_bf16(l > 0 ? acc / l : 0.0f);
    } else {
      // Workspace: normalized partial outputs [B, H, splits, D], then lse [B, H, splits].
      auto* partial_out = static_cast<float*>(p.workspace);
      float* lse =
          partial_out + static_cast<std::int64_t>(gridDim.z) * heads_out * p.num_splits * D;
      const std::int64_t index =
          (static_cast<std::int64_t>(b) * heads_out + h) * p.num_splits + split;
      partial_out[index * D + dim] = l > 0 ? acc / l : 0.0f;
      if (dim == 0) lse[index] = l > 0 ? m + log2f(l) : kNegInf;
    }
  }
}

// Grid (B, H), D threads: out = sum_s 2^(lse_s - max) o_s / sum_s 2^(lse_s - max).
__global__ void decode_merge_kernel(DecodeAttentionParams p, int head_dim) {
  const int b = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const auto* partial_out = static_cast<const float*>(p.workspace);
  const float* lse =
      partial_out + static_cast<std::int64_t>(gridDim.x) * p.num_heads * p.num_splits * head_dim;
  const std::int64_t first = (static_cast<std::int64_t>(b) * p.num_heads + h) * p.num_splits;
  float m = kNegInf;
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, lse[first + s]);
  for (int dim = static_cast<int>(threadIdx.x); dim < head_dim;
       dim += static_cast<int>(blockDim.x)) {
    float total = 0;
    float acc = 0;
    for (int s = 0; s < p.num_splits; ++s) {
      if (lse[first + s] == kNegInf) continue;
      const float weight = exp2f(lse[first + s] - m);
      total += weight;
      acc += weight * partial_out[(first + s) * head_dim + dim];
    }
    p.out[static_cast<std::int64_t>(p.q_rows[b]) * p.out_row_stride +
          static_cast<std::int64_t>(h) * head_dim + dim] =
        float_to_bf16(total > 0 ? acc / total : 0.0f);
  }
}

template <class CacheT, int D, int GROUP>
void launch(const DecodeAttentionParams& p, void* stream) {
  auto* kernel = &decode_kernel<CacheT, D, GROUP>;
  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(p.cache.num_kv_heads),
                  static_cast<unsigned>(p.num_seqs));
  PG_LAUNCH(kernel, grid, dim3(kThreads), 0, stream, p);
  if (p.num_splits > 1) {
    auto* merge_kernel = &decode_merge_kernel;
    PG_LAUNCH(merge_kernel,
              dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)),
              dim3(static_cast<unsigned>(std::min(D, 128))), 0, stream, p, D);
  }
}

template <class CacheT, int D>
void dispatch_group(const DecodeAttentionParams& p, void* stream) {
  switch (p.num_heads / p.cache.num_kv_heads) {
    case 1: return launch<CacheT, D, 1>(p, stream);
    case 2: return launch<CacheT, D, 2>(p, stream);
    case 4: return launch<CacheT, D, 4>(p, stream);
    case 8: return launch<CacheT, D, 8>(p, stream);
    default: unsupported_shape("decode attention: query heads per KV head must be 1, 2, 4 or 8");
  }
}

template <class CacheT>
void dispatch_dim(const DecodeAttentionParams& p, void* stream) {
  switch (p.cache.head_dim) {
    case 16: return dispatch_group<CacheT, 16>(p, stream);
    case 32: return dispatch_group<CacheT, 32>(p, stream);
    case 64: return dispatch_group<CacheT, 64>(p, stream);
    case 128: return dispatch_group<CacheT, 128>(p, stream);
    case 256: return dispatch_group<CacheT, 256>(p, stream);
    default: unsupported_shape("decode attention: head_dim must be 16, 32, 64, 128 or 256");
  }
}

}  // namespace

void decode_attention(const DecodeAttentionParams& p, void* stream) {
  if (p.num_seqs == 0) return;
  if (p.cache.dtype == KvDtype::kBf16) {
    dispatch_dim<std::uint16_t>(p, stream);
  } else {
    dispatch_dim<std::uint8_t>(p, stream);
  }
}

}  // namespace prefixgate::kernels::PG_NS
