// What every kernel source includes: the CUDA or emulator vocabulary, the launch macro, the
// namespace its launchers go in, and small device helpers (bf16/e4m3 conversions, reductions).
//
// Each .cu file is compiled twice: by nvcc into namespace prefixgate::kernels::cuda, and as C++
// (emu/kernels_emu.cpp, PREFIXGATE_KERNELS_EMU) into prefixgate::kernels::emu, where the CUDA
// emulator runs it on the CPU. Kernels therefore use only what the emulator models: threads,
// blocks, __shared__, __syncthreads, __syncwarp and the *_sync shuffles with full warps.
#pragma once

#include <cstdint>

#include "launchers.h"
#include "prefixgate/kernels/params.h"
#include "random_value.h"

#if defined(PREFIXGATE_KERNELS_EMU)
#include <bit>

#include "emu/cuda_emu.h"
#define PG_NS emu
// Blocks run one after another on the calling thread; the stream is ignored.
#define PG_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)          \
  do {                                                                     \
    (void)(stream);                                                        \
    ::prefixgate::kernels::emu_rt::launch((grid), (block), (shared_bytes), \
                                          [&] { kernel(__VA_ARGS__); });   \
  } while (false)
#else
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#define PG_NS cuda
#define PG_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), static_cast<cudaStream_t>(stream)>>>(__VA_ARGS__)
#endif

namespace prefixgate::kernels::PG_NS {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ float bits_as_float(std::uint32_t bits) {
#if defined(PREFIXGATE_KERNELS_EMU)
  return std::bit_cast<float>(bits);
#else
  return __uint_as_float(bits);
#endif
}

// bf16 is the top half of an fp32: widening is a shift.
__device__ __forceinline__ float bf16_to_float(std::uint16_t bits) {
  return bits_as_float(std::uint32_t{bits} << 16);
}
// Round to nearest even, NaN kept (the CUDA intrinsic, on both builds).
__device__ __forceinline__ std::uint16_t float_to_bf16(float value) {
#if defined(PREFIXGATE_KERNELS_EMU)
  return std::bit_cast<std::uint16_t>(__float2bfloat16(value));
#else
  return __bfloat16_as_ushort(__float2bfloat16(value));
#endif
}
// e4m3, saturating to +-448 (values are scaled into range first).
__device__ __forceinline__ std::uint8_t float_to_fp8(float value) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3));
}

// Eight bf16 (16 bytes) to floats.
__device__ __forceinline__ void unpack(const uint4& v, float (&out)[8]) {
  const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bits_as_float(words[i] << 16);
    out[2 * i + 1] = bits_as_float(words[i] & 0xffff0000u);
  }
}
// Eight e4m3 (8 bytes) to floats, two at a time (one conversion instruction a pair on the GPU).
__device__ __forceinline__ void unpack(const uint2& v, float (&out)[8]) {
  const std::uint32_t words[2] = {v.x, v.y};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>(words[i / 2] >> (16 * (i % 2)));
    const float2 f =
        __half22float2(__half2(__half2_raw(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3))));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
// Sixteen e4m3 (16 bytes) to floats.
__device__ __forceinline__ void unpack(const uint4& v, float (&out)[16]) {
  float low[8];
  float high[8];
  unpack(uint2{v.x, v.y}, low);
  unpack(uint2{v.z, v.w}, high);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    out[i] = low[i];
    out[8 + i] = high[i];
  }
}

// 2^x by the special-function unit alone (ex2.approx.ftz: relative error within 2^-22, results
// below 2^-126 flush to 0, 2^-inf = 0), where exp2f adds range handling around it. Softmax
// weights need no more.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(PREFIXGATE_KERNELS_EMU)
  return std::exp2(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0;
  const int warps = static_cast<int>((blockDim.x + 31) / 32);
  for (int w = 0; w < warps; ++w) total += partial[w];
  __syncthreads();  // `partial` is free for the next call
  return total;
}

}  // namespace prefixgate::kernels::PG_NS
