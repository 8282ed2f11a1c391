// RoPE on the new tokens' q and k, fused with writing k and v into their KV pages (bf16, or
// e4m3 with one scale per token and head). One block per token and eight heads, one warp per head.
#include "kv_cache.cuh"

namespace prefixgate::kernels::PG_NS {
namespace {

constexpr int kWarps = 8;
// Values of one head a lane holds: head_dim <= 256.
constexpr int kMaxPerLane = 8;

// Stores a head's values (lane l holds pairs j = l + 32 i: values j and j + D/2) into the
// cache at `offset`, as bf16 or as e4m3 scaled by the head's largest magnitude / 448.
__device__ void store_head(const KvCacheView& c, std::int64_t offset, std::int64_t scale_offset,
                           const float (&v)[kMaxPerLane], int half, int lane) {
  if (c.dtype == KvDtype::kBf16) {
    auto* out = static_cast<std::uint16_t*>(c.data) + offset;
    for (int i = 0; i * 32 + lane < half; ++i) {
      out[i * 32 + lane] = float_to_bf16(v[2 * i]);
      out[i * 32 + lane + half] = float_to_bf16(v[2 * i + 1]);
    }
    return;
  }
  float amax = 0;
  for (int i = 0; i * 32 + lane < half; ++i) {
    amax = fmaxf(amax, fmaxf(fabsf(v[2 * i]), fabsf(v[2 * i + 1])));
  }
  amax = warp_max(amax);
  const float scale = amax / kFp8E4m3Max;
  const float inv = amax > 0 ? kFp8E4m3Max / amax : 0.0f;
  auto* out = static_cast<std::uint8_t*>(c.data) + offset;
  for (int i = 0; i * 32 + lane < half; ++i) {
    out[i * 32 + lane] = float_to_fp8(v[2 * i] * inv);
    out[i * 32 + lane + half] = float_to_fp8(v[2 * i + 1] * inv);
  }
  if (lane == 0) c.scales[scale_offset] = scale;
}

__global__ void rope_kv_kernel(RopeKvParams p) {
  const int t = static_cast<int>(blockIdx.x);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const KvCacheView& c = p.cache;
  const int d = c.head_dim;
  const int half = d / 2;
  const int g_heads = c.num_kv_heads;
  const int heads = p.num_heads + 2 * g_heads;
  std::uint16_t* row = p.qkv + static_cast<std::int64_t>(t) * heads * d;
  const float* cos_row = p.cos + static_cast<std::int64_t>(t) * half;
  const float* sin_row = p.sin + static_cast<std::int64_t>(t) * half;
  const std::int64_t slot = p.slots[t];
  const std::int64_t page = slot / c.page_tokens;
  const int in_page = static_cast<int>(slot % c.page_tokens);

  // Block y of a token takes heads [y * kWarps, + kWarps), one per warp, so that a decode
  // step's few tokens still spread over many multiprocessors. Warp-uniform: every lane of a
  // warp takes the same head (store_head reduces over the warp).
  const int h = static_cast<int>(blockIdx.y) * kWarps + warp;
  if (h < heads) {
    std::uint16_t* head = row + static_cast<std::int64_t>(h) * d;
    float v[kMaxPerLane] = {};
    const bool is_v = h >= p.num_heads + g_heads;
    for (int i = 0; i * 32 + lane < half; ++i) {
      const int j = i * 32 + lane;
      const float a = bf16_to_float(head[j]);
      const float b = bf16_to_float(head[j + half]);
      if (is_v) {
        v[2 * i] = a;
        v[2 * i + 1] = b;
      } else {
        v[2 * i] = a * cos_row[j] - b * sin_row[j];
        v[2 * i + 1] = b * cos_row[j] + a * sin_row[j];
      }
    }
    if (h < p.num_heads) {
      for (int i = 0; i * 32 + lane < half; ++i) {
        head[i * 32 + lane] = float_to_bf16(v[2 * i]);
        head[i * 32 + lane + half] = float_to_bf16(v[2 * i + 1]);
      }
    } else {
      const int kind = is_v ? 1 : 0;
      const int g = h - p.num_heads - kind * g_heads;
      store_head(c, kv_offset(c, page, kind, g, in_page),
                 kv_scale_offset(c, page, kind, g, in_page), v, half, lane);
    }
  }
}

}  // namespace

void rope_kv_write(const RopeKvParams& p, void* stream) {
  if (p.num_tokens == 0) return;
  const int heads = p.num_heads + 2 * p.cache.num_kv_heads;
  PG_LAUNCH(rope_kv_kernel,
            dim3(static_cast<unsigned>(p.num_tokens),
                 static_cast<unsigned>((heads + kWarps - 1) / kWarps)),
            dim3(kWarps * 32), 0, stream, p);
}

}  // namespace prefixgate::kernels::PG_NS
