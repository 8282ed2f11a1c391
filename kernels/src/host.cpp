// Host-side helpers of params.h: launch planning and the bf16/e4m3 conversions, through the
// same CUDA header functions the kernels use, so host and device round alike.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "launchers.h"
#include "prefixgate/base/check.h"
#include "prefixgate/kernels/params.h"
#include "random_value.h"

namespace prefixgate::kernels {

// Shapes are checked before any launch (unsupported_attention_shape() at device creation): a
// launch with another one is a bug in the caller.
void unsupported_shape(const char* what) {
  PG_CHECK(false, std::string("prefixgate kernels: unsupported shape: ") + what);
  __builtin_unreachable();
}

const char* unsupported_attention_shape(int head_dim, int group) {
  if (head_dim != 16 && head_dim != 32 && head_dim != 64 && head_dim != 128 && head_dim != 256) {
    return "head_dim must be 16, 32, 64, 128 or 256";
  }
  if (group != 1 && group != 2 && group != 4 && group != 8) {
    return "query heads per KV head must be 1, 2, 4 or 8";
  }
  return nullptr;
}

int decode_attention_splits(int num_seqs, int num_kv_heads, int max_context_len,
                            int multiprocessors, int min_split_tokens, int waves) {
  const int blocks = std::max(1, num_seqs * num_kv_heads);
  // Rounded down: one more split would start a second, partial wave of blocks, which runs
  // while most multiprocessors wait (measured: 5 splits of 16 sequences x 8 KV heads, 1.2 waves
  // on 132 multiprocessors, read K/V at 69% of the copy bandwidth).
  const int wanted = std::max(1, waves * multiprocessors / blocks);
  const int by_length = std::max(1, max_context_len / std::max(1, min_split_tokens));
  return std::clamp(std::min(wanted, by_length), 1, 64);
}

std::size_t decode_attention_workspace_bytes(int num_seqs, int num_heads, int head_dim,
                                             int num_splits) {
  if (num_splits <= 1) return 0;
  const auto partials = static_cast<std::size_t>(num_seqs) * static_cast<std::size_t>(num_heads) *
                        static_cast<std::size_t>(num_splits);
  return partials * (static_cast<std::size_t>(head_dim) + 1) * sizeof(float);
}

float fill_random_value(std::uint64_t seed, std::size_t index, float scale, float offset) {
  return random_value(seed, index, scale, offset);
}

std::uint16_t to_bf16(float value) {
  const __nv_bfloat16 b = __float2bfloat16(value);
  std::uint16_t bits;
  std::memcpy(&bits, &b, sizeof(bits));
  return bits;
}

float from_bf16(std::uint16_t bits) {
  const std::uint32_t wide = std::uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

std::uint8_t to_fp8_e4m3(float value) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3));
}

float from_fp8_e4m3(std::uint8_t bits) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E4M3)));
}

}  // namespace prefixgate::kernels
