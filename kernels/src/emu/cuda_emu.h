// A CUDA execution emulator for the CPU: runs the kernels' own source, unchanged, on the host, so
// that CI (which has no GPU) tests every kernel's indexing, synchronisation and arithmetic
// against its CPU reference, and ASan checks every memory access the kernel makes.
//
// How: a launch runs its blocks one after another; the threads of a block are fibers
// (ucontext) on the calling thread, switched at __syncthreads, __syncwarp and warp shuffles.
// Shuffles exchange values through per-warp slots. __shared__ variables become function
// statics: blocks never overlap, so one copy serves every block. Device memory is host memory.
//
// What it does not model: timing, memory ordering between blocks (they run in turn), atomics
// racing (they are plain read-modify-writes), warp divergence (lanes advance independently
// between barriers, which is what independent thread scheduling permits anyway). A barrier that
// some live thread never reaches is reported as a deadlock and aborts, as the GPU would hang.
//
// Kernel source includes this through common.cuh when PREFIXGATE_KERNELS_EMU is defined.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <vector_types.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

namespace prefixgate::kernels::emu_rt {

// The block being run and the fiber (thread) running in it.
const uint3& thread_idx();
const uint3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();

// Rendezvous of every live thread of the block / of the warp of the calling thread.
void sync_block();
void sync_warp();

// Warp exchange: every live lane of the warp calls it with its value; returns the value that
// lane `source(lane)` passed. At most 8 bytes.
void exchange(const void* value, void* out, std::size_t bytes, int source_lane);
int lane_id();

// Runs `kernel` for every block of `grid`, `block` threads each, with `shared_bytes` of
// dynamic shared memory. Returns when all have finished.
void launch(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel);
void* dynamic_shared();

template <class T>
T shuffle_from(T value, int source_lane) {
  static_assert(sizeof(T) <= 8, "emulated shuffles carry at most 8 bytes");
  T out;
  exchange(&value, &out, sizeof(T), source_lane);
  return out;
}

}  // namespace prefixgate::kernels::emu_rt

// The CUDA vocabulary kernels use, mapped onto the emulator.
#undef __global__
#undef __device__
#undef __shared__
#undef __forceinline__
#undef __host__
#define __global__
#define __launch_bounds__(...)
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define threadIdx (::prefixgate::kernels::emu_rt::thread_idx())
#define blockIdx (::prefixgate::kernels::emu_rt::block_idx())
#define blockDim (::prefixgate::kernels::emu_rt::block_dim())
#define gridDim (::prefixgate::kernels::emu_rt::grid_dim())

inline void __syncthreads() {
  ::prefixgate::kernels::emu_rt::sync_block();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::prefixgate::kernels::emu_rt::sync_warp();
}
// width: lanes are in groups of `width`; a source outside the caller's group reads its own value.
template <class T>
T __shfl_xor_sync(unsigned, T value, int lane_mask, int width = 32) {
  const int lane = ::prefixgate::kernels::emu_rt::lane_id();
  int source = lane ^ lane_mask;
  if (source >= 32 || (source & ~(width - 1)) != (lane & ~(width - 1))) source = lane;
  return ::prefixgate::kernels::emu_rt::shuffle_from(value, source);
}
template <class T>
T __shfl_sync(unsigned, T value, int source_lane, int width = 32) {
  const int lane = ::prefixgate::kernels::emu_rt::lane_id();
  const int source = (lane & ~(width - 1)) + (source_lane & (width - 1));
  return ::prefixgate::kernels::emu_rt::shuffle_from(value, source);
}
template <class T>
T __ldg(const T* p) {
  return *p;
}
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
