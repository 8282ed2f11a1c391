// Paged decode attention for grouped-query attention, split over the context (flash-decoding).
//
// Grid (num_splits, G, B), 128 threads. A block reads one KV head's K and V over its split of
// one sequence's context exactly once, for all GROUP = H / G query heads that share that head.
// Within a warp, LANES = D / 8 lanes cover one token's head_dim, 8 values each (one 16-byte load
// of bf16, 8 bytes of e4m3), so a warp load covers SLOTS = 32 / LANES consecutive tokens.
//
// Decode reads every K/V byte once and does little arithmetic per byte, so the kernel is
// built to keep many loads in flight and to spend few instructions per token:
// - a step takes a tile of TILE tokens per slot, issuing all their K and V loads first;
// - the TILE x GROUP partial dot products of a slot are summed across its LANES lanes by a
//   transposing reduction (each stage a lane keeps half its values and adds its partner's copy
//   of that half), one shuffle per score instead of log2(LANES);
// - the scores go through shared memory to every lane of the slot, and the online softmax
//   rescales the accumulator once per tile, not once per token.
// Each slot keeps its own online-softmax state (max, sum, accumulator); the states merge by
// log-sum-exp across the warp (shuffles), across the block's warps (shared memory) and, when
// num_splits > 1, across splits (decode_merge_kernel over the workspace). Scores are in base 2
// (q is prescaled by softmax_scale * log2(e)), so exponentials are exp2.
#include <algorithm>
#include <type_traits>

#include "kv_cache.cuh"

namespace prefixgate::kernels::PG_NS {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;  // cache values per lane per token
// Tokens per slot per step, and blocks per multiprocessor the registers are sized for: a lane
// holds GROUP x 8 query values and as many accumulators, so eight heads per KV head take a
// shorter tile and twice the registers.
template <int GROUP>
constexpr int kTile = GROUP >= 8 ? 2 : 4;
template <int GROUP>
constexpr int kMinBlocks = GROUP >= 8 ? 2 : 4;

// a := merge(a, b) of two online-softmax states (m: max, base 2; l: sum of 2^(s - m); acc: sum
// of 2^(s - m) * v), either of which may be empty (m = -inf).
__device__ __forceinline__ void merge(float& am, float& al, float (&aacc)[kVec], float bm, float bl,
                                      const float (&bacc)[kVec]) {
  const float m = fmaxf(am, bm);
  if (m == kNegInf) return;
  const float wa = am == kNegInf ? 0.0f : exp2f(am - m);
  const float wb = bm == kNegInf ? 0.0f : exp2f(bm - m);
  am = m;
  al = al * wa + bl * wb;
#pragma unroll
  for (int v = 0; v < kVec; ++v) aacc[v] = aacc[v] * wa + bacc[v] * wb;
}

// The transposing reduction of a slot's partial scores over its lanes (offsets below LANES
// stay in the slot). At each stage a lane keeps one half of its COUNT values, adds its
// partner's copy of that half, and sends the other half, so after log2(LANES) stages lane
// `chunk` holds whole scores [chunk * COUNT / LANES, + COUNT / LANES) (or, when there are fewer
// scores than lanes, score chunk / (LANES / COUNT), which several lanes share). Templates, so
// that every stage unrolls into registers.
template <int OFFSET, int COUNT, int N>
__device__ __forceinline__ void transpose_reduce(float (&dot)[N], int chunk) {
  if constexpr (OFFSET > 0) {
    if constexpr (COUNT > 1) {
      constexpr int kHalf = COUNT / 2;
      const bool upper = (chunk & OFFSET) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const float send = upper ? dot[i] : dot[i + kHalf];
        const float keep = upper ? dot[i + kHalf] : dot[i];
        dot[i] = keep + __shfl_xor_sync(0xffffffffu, send, OFFSET);
      }
      transpose_reduce<OFFSET / 2, kHalf>(dot, chunk);
    } else {
      dot[0] += __shfl_xor_sync(0xffffffffu, dot[0], OFFSET);
      transpose_reduce<OFFSET / 2, 1>(dot, chunk);
    }
  }
}

template <class CacheT, int D, int GROUP>
__global__ void __launch_bounds__(kThreads, kMinBlocks<GROUP>)
    decode_kernel(DecodeAttentionParams p) {
  using Load = std::conditional_t<sizeof(CacheT) == 2, uint4, uint2>;
  constexpr bool kFp8 = sizeof(CacheT) == 1;
  constexpr int LANES = D / kVec;    // lanes per token
  constexpr int SLOTS = 32 / LANES;  // tokens per warp load
  constexpr int TILE = kTile<GROUP>;
  constexpr int SCORES = TILE * GROUP;  // (token, head) scores of a slot per step
  // After the reduction a lane holds KEPT whole scores, or, when there are fewer scores than
  // lanes, one score that LANES / SCORES lanes share.
  constexpr int KEPT = SCORES >= LANES ? SCORES / LANES : 1;
  static_assert(LANES >= 1 && LANES <= 32 && D % kVec == 0, "head_dim fits a warp");

  const int split = static_cast<int>(blockIdx.x);
  const int g = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int slot = lane / LANES;   // which token of a warp load
  const int chunk = lane % LANES;  // which 8 dims
  const KvCacheView& c = p.cache;

  constexpr int kWarpTile = SLOTS * TILE;  // tokens of a warp's step
  const int context = p.context_lens[b];
  // Splits start on a warp tile, so that where pages hold a whole number of warp tiles (the
  // engine's 16-token pages, D >= 64), a warp's step lies in one page.
  const int per_split =
      ((context + p.num_splits - 1) / p.num_splits + kWarpTile - 1) / kWarpTile * kWarpTile;
  const int begin = split * per_split;
  const int end = begin + per_split < context ? begin + per_split : context;
  const bool tiles_in_a_page = c.page_tokens % kWarpTile == 0;

  // This lane's slice of each query head, prescaled into base 2.
  float q[GROUP][kVec];
  const float q_scale = p.softmax_scale * kLog2e;
#pragma unroll
  for (int gi = 0; gi < GROUP; ++gi) {
    const std::uint16_t* qh = p.q + static_cast<std::int64_t>(p.q_rows[b]) * p.q_row_stride +
                              static_cast<std::int64_t>(g * GROUP + gi) * D + chunk * kVec;
#pragma unroll
    for (int v = 0; v < kVec; ++v) q[gi][v] = bf16_to_float(qh[v]) * q_scale;
  }

  float run_m[GROUP];
  float run_l[GROUP];
  float run_acc[GROUP][kVec];
#pragma unroll
  for (int gi = 0; gi < GROUP; ++gi) {
    run_m[gi] = kNegInf;
    run_l[gi] = 0;
#pragma unroll
    for (int v = 0; v < kVec; ++v) run_acc[gi][v] = 0;
  }
  __shared__ float shared_scores[kWarps][SLOTS][SCORES];
  const std::int32_t* table = p.page_table + static_cast<std::int64_t>(b) * p.page_table_stride;
  const auto* cache = static_cast<const CacheT*>(c.data);
  // K of token t; V lies num_kv_heads pages-of-one-head further (kv_offset's kind 1).
  const std::int64_t v_delta = static_cast<std::int64_t>(c.num_kv_heads) * c.page_tokens * D;
  const std::int64_t v_scale_delta = static_cast<std::int64_t>(c.num_kv_heads) * c.page_tokens;
  const auto token_k = [&](int t) {
    return cache + kv_offset(c, table[t / c.page_tokens], 0, g, t % c.page_tokens) + chunk * kVec;
  };
  const auto token_k_scale = [&](int t) {
    return c.scales + kv_scale_offset(c, table[t / c.page_tokens], 0, g, t % c.page_tokens);
  };

  // Warp-uniform loop bound: every lane takes part in each step's shuffles.
  for (int base = begin + warp * kWarpTile; base < end; base += kWarps * kWarpTile) {
    const bool full = base + kWarpTile <= end;
    // Token j of this slot: base + j * SLOTS + slot. All loads first.
    Load kbits[TILE];
    Load vbits[TILE];
    float k_scale[TILE];
    float v_scale[TILE];
    if (tiles_in_a_page && full) {
      // The common case: the step's tokens all count and lie in one page, so their addresses
      // are one lookup and constant offsets.
      const CacheT* k = token_k(base + slot);
#pragma unroll
      for (int j = 0; j < TILE; ++j) {
        kbits[j] = *reinterpret_cast<const Load*>(k + j * SLOTS * D);
        vbits[j] = *reinterpret_cast<const Load*>(k + j * SLOTS * D + v_delta);
        k_scale[j] = 1;
        v_scale[j] = 1;
      }
      if constexpr (kFp8) {
        const float* ks = token_k_scale(base + slot);
#pragma unroll
        for (int j = 0; j < TILE; ++j) {
          k_scale[j] = ks[j * SLOTS];
          v_scale[j] = ks[j * SLOTS + v_scale_delta];
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < TILE; ++j) {
        const int t = base + j * SLOTS + slot;
        kbits[j] = Load{};
        vbits[j] = Load{};
        k_scale[j] = 1;
        v_scale[j] = 1;
        if (t < end) {
          const CacheT* k = token_k(t);
          kbits[j] = *reinterpret_cast<const Load*>(k);
          vbits[j] = *reinterpret_cast<const Load*>(k + v_delta);
          if constexpr (kFp8) {
            const float* ks = token_k_scale(t);
            k_scale[j] = ks[0];
            v_scale[j] = ks[v_scale_delta];
          }
        }
      }
    }
    // This lane's part of every score: dot[j * GROUP + gi].
    float dot[SCORES];
#pragma unroll
    for (int j = 0; j < TILE; ++j) {
      float k[kVec];
      unpack(kbits[j], k);  // bf16 from 16 bytes, e4m3 from 8
#pragma unroll
      for (int gi = 0; gi < GROUP; ++gi) {
        float d = 0;
#pragma unroll
        for (int i = 0; i < kVec; ++i) d += q[gi][i] * k[i];
        dot[j * GROUP + gi] = d;
      }
    }
    transpose_reduce<LANES / 2, SCORES>(dot, chunk);
    if constexpr (SCORES >= LANES) {
#pragma unroll
      for (int r = 0; r < KEPT; ++r) shared_scores[warp][slot][chunk * KEPT + r] = dot[r];
    } else if (chunk % (LANES / SCORES) == 0) {
      shared_scores[warp][slot][chunk / (LANES / SCORES)] = dot[0];
    }
    __syncwarp();
    float score[SCORES];
#pragma unroll
    for (int i = 0; i < SCORES; ++i) score[i] = shared_scores[warp][slot][i];
    __syncwarp();  // the next step overwrites shared_scores
    // The online softmax, once per tile and head; past the end a token scores -inf. While a
    // slot has seen nothing (max -inf), the exponents are taken against 0, so every weight
    // and the rescale factor are 2^-inf = 0.
#pragma unroll
    for (int gi = 0; gi < GROUP; ++gi) {
      float tile_max = kNegInf;
#pragma unroll
      for (int j = 0; j < TILE; ++j) {
        float& s = score[j * GROUP + gi];
        if constexpr (kFp8) s *= k_scale[j];
        if (!full && base + j * SLOTS + slot >= end) s = kNegInf;
        tile_max = fmaxf(tile_max, s);
      }
      const float m_new = fmaxf(run_m[gi], tile_max);
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      const float alpha = fast_exp2(run_m[gi] - m_use);
      run_m[gi] = m_new;
      run_l[gi] *= alpha;
#pragma unroll
      for (int i = 0; i < kVec; ++i) run_acc[gi][i] *= alpha;
#pragma unroll
      for (int j = 0; j < TILE; ++j) {
        const float weight = fast_exp2(score[j * GROUP + gi] - m_use);
        run_l[gi] += weight;
        score[j * GROUP + gi] = kFp8 ? weight * v_scale[j] : weight;
      }
    }
#pragma unroll
    for (int j = 0; j < TILE; ++j) {
      float v[kVec];
      unpack(vbits[j], v);
#pragma unroll
      for (int gi = 0; gi < GROUP; ++gi) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) run_acc[gi][i] += score[j * GROUP + gi] * v[i];
      }
    }
  }

  // Merge the slots of the warp: lanes with the same chunk, LANES apart.
#pragma unroll
  for (int gi = 0; gi < GROUP; ++gi) {
    for (int offset = LANES; offset < 32; offset *= 2) {
      const float om = __shfl_xor_sync(0xffffffffu, run_m[gi], offset);
      const float ol = __shfl_xor_sync(0xffffffffu, run_l[gi], offset);
      float oacc[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) oacc[i] = __shfl_xor_sync(0xffffffffu, run_acc[gi][i], offset);
      merge(run_m[gi], run_l[gi], run_acc[gi], om, ol, oacc);
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
        shared_m[warp][gi] = run_m[gi];
        shared_l[warp][gi] = run_l[gi];
      }
#pragma unroll
      for (int i = 0; i < kVec; ++i) shared_acc[warp][gi][chunk * kVec + i] = run_acc[gi][i];
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

// Grid (B, H), kMergeThreads threads: out = sum_s 2^(lse_s - max) o_s / sum_s 2^(lse_s - max).
// The splits' weights are computed once, in parallel, into shared memory. Then the threads
// take (dim, part) pairs: part k of PARTS sums the splits k, k + PARTS, ... with its loads
// unrolled, so that all of a dim's loads are in flight at once, and the parts add up through
// shared memory.
constexpr int kMergeThreads = 512;
constexpr int kMaxSplits = 64;  // decode_attention_splits() never plans more
template <int D>
__global__ void __launch_bounds__(kMergeThreads) decode_merge_kernel(DecodeAttentionParams p) {
  constexpr int PARTS = kMergeThreads / D;
  const int b = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int t = static_cast<int>(threadIdx.x);
  const auto* partial_out = static_cast<const float*>(p.workspace);
  const float* lse =
      partial_out + static_cast<std::int64_t>(gridDim.x) * p.num_heads * p.num_splits * D;
  const std::int64_t first = (static_cast<std::int64_t>(b) * p.num_heads + h) * p.num_splits;
  __shared__ float weights[kMaxSplits];
  __shared__ float parts[PARTS][D];
  if (t < 32) {  // the splits' weights, by the first warp (at most 64 splits)
    const float a = t < p.num_splits ? lse[first + t] : kNegInf;
    const float c = t + 32 < p.num_splits ? lse[first + t + 32] : kNegInf;
    const float m = warp_max(fmaxf(a, c));
    if (t < p.num_splits) weights[t] = a == kNegInf ? 0.0f : exp2f(a - m);
    if (t + 32 < p.num_splits) weights[t + 32] = c == kNegInf ? 0.0f : exp2f(c - m);
  }
  __syncthreads();
  const int dim = t % D;
  const int part = t / D;
  const float* o = partial_out + first * D + dim;
  float acc = 0;
#pragma unroll 16
  for (int s = part; s < p.num_splits; s += PARTS) acc += weights[s] * o[s * D];
  parts[part][dim] = acc;
  __syncthreads();
  if (t >= D) return;
  float total = 0;
  for (int s = 0; s < p.num_splits; ++s) total += weights[s];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < PARTS; ++k) sum += parts[k][t];
  p.out[static_cast<std::int64_t>(p.q_rows[b]) * p.out_row_stride +
        static_cast<std::int64_t>(h) * D + t] = float_to_bf16(total > 0 ? sum / total : 0.0f);
}

template <class CacheT, int D, int GROUP>
void launch(const DecodeAttentionParams& p, void* stream) {
  auto* kernel = &decode_kernel<CacheT, D, GROUP>;
  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(p.cache.num_kv_heads),
                  static_cast<unsigned>(p.num_seqs));
  PG_LAUNCH(kernel, grid, dim3(kThreads), 0, stream, p);
  if (p.num_splits > 1) {
    auto* merge_kernel = &decode_merge_kernel<D>;
    PG_LAUNCH(merge_kernel,
              dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)),
              dim3(kMergeThreads), 0, stream, p);
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
  if (p.num_splits < 1 || p.num_splits > kMaxSplits) {
    unsupported_shape("decode attention: num_splits must be 1 to 64");
  }
  if (p.cache.dtype == KvDtype::kBf16) {
    dispatch_dim<std::uint16_t>(p, stream);
  } else {
    dispatch_dim<std::uint8_t>(p, stream);
  }
}

}  // namespace prefixgate::kernels::PG_NS
