// The CUDA emulator's own semantics, which every emulated kernel test relies on: thread and block
// indices, shared memory across a block, __syncthreads ordering, warp shuffles (xor, indexed,
// with a width), threads that return early, and a deadlocked barrier aborting instead of hanging.
#include "emu/cuda_emu.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "emu/cuda_emu_wmma.h"

namespace prefixgate::kernels {
namespace {

using emu_rt::launch;

TEST(CudaEmuTest, EveryThreadOfEveryBlockRunsOnceWithItsIndices) {
  std::vector<int> seen(3 * 2 * 64, 0);
  launch(dim3(3, 2), dim3(32, 2), 0, [&] {
    const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
    const unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
    ++seen[block * 64 + thread];
  });
  for (int count : seen) ASSERT_EQ(count, 1);
}

TEST(CudaEmuTest, SyncthreadsOrdersSharedMemoryAcrossTheBlock) {
  std::vector<int> out(128);
  launch(dim3(2), dim3(128), 0, [&] {
    __shared__ int values[128];
    const int t = static_cast<int>(threadIdx.x);
    values[t] = t * static_cast<int>(blockIdx.x + 1);
    __syncthreads();
    // Read a value another thread wrote before the barrier.
    const int other = values[127 - t];
    __syncthreads();
    if (blockIdx.x == 1) out[static_cast<std::size_t>(t)] = other;
  });
  for (int t = 0; t < 128; ++t) ASSERT_EQ(out[static_cast<std::size_t>(t)], (127 - t) * 2);
}

TEST(CudaEmuTest, WarpShufflesFollowCudaSemantics) {
  std::vector<float> sums(64), from3(64), xor8(64);
  std::vector<int> narrow(64);
  launch(dim3(1), dim3(64), 0, [&] {
    const int t = static_cast<int>(threadIdx.x);
    float v = static_cast<float>(t);
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    sums[static_cast<std::size_t>(t)] = v;
    from3[static_cast<std::size_t>(t)] = __shfl_sync(0xffffffffu, static_cast<float>(t), 3);
    xor8[static_cast<std::size_t>(t)] = __shfl_xor_sync(0xffffffffu, static_cast<float>(t), 8);
    // Width 4: lanes in groups of 4; source lane 1 of each group.
    narrow[static_cast<std::size_t>(t)] = __shfl_sync(0xffffffffu, t, 1, 4);
  });
  for (int t = 0; t < 64; ++t) {
    const int warp_base = t / 32 * 32;
    ASSERT_EQ(sums[static_cast<std::size_t>(t)], static_cast<float>(32 * warp_base + 496)) << t;
    ASSERT_EQ(from3[static_cast<std::size_t>(t)], static_cast<float>(warp_base + 3)) << t;
    ASSERT_EQ(xor8[static_cast<std::size_t>(t)], static_cast<float>(t ^ 8)) << t;
    ASSERT_EQ(narrow[static_cast<std::size_t>(t)], t / 4 * 4 + 1) << t;
  }
}

TEST(CudaEmuTest, ThreadsThatReturnDoNotHoldBackTheBarrier) {
  std::vector<int> out(64, -1);
  launch(dim3(1), dim3(64), 0, [&] {
    __shared__ int total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    if (threadIdx.x >= 32) return;  // a whole warp leaves
    total += 1;
    __syncthreads();
    out[threadIdx.x] = total;
  });
  for (int t = 0; t < 32; ++t) ASSERT_EQ(out[static_cast<std::size_t>(t)], 32);
}

TEST(CudaEmuTest, DynamicSharedMemoryIsSizedAndZeroed) {
  std::vector<int> out(32);
  launch(dim3(1), dim3(32), 32 * sizeof(int), [&] {
    auto* shared = static_cast<int*>(emu_rt::dynamic_shared());
    shared[threadIdx.x] += static_cast<int>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = shared[31 - threadIdx.x];
  });
  for (int t = 0; t < 32; ++t) ASSERT_EQ(out[static_cast<std::size_t>(t)], 31 - t);
}

TEST(CudaEmuDeathTest, ABarrierSomeThreadsNeverReachIsADeadlock) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Half of the second warp waits at __syncwarp, everyone else at __syncthreads.
  EXPECT_DEATH(launch(dim3(1), dim3(64), 0,
                      [] {
                        if (threadIdx.x >= 32 && threadIdx.x < 48) __syncwarp();
                        __syncthreads();
                      }),
               "deadlock");
}

TEST(CudaEmuDeathTest, AShuffleFromAReturnedLaneAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(launch(dim3(1), dim3(32), 0,
                      [] {
                        if (threadIdx.x == 5) return;
                        (void)__shfl_sync(0xffffffffu, 1, 5);
                      }),
               "returned");
}

// A 16x16x16 product through the wmma model, against plain loops.
TEST(CudaEmuTest, WmmaComputesTheTileProduct) {
  namespace wmma = nvcuda::wmma;
  alignas(128) __nv_bfloat16 a[16 * 16];
  alignas(128) __nv_bfloat16 b[16 * 16];
  alignas(128) float c[16 * 16];
  for (int i = 0; i < 256; ++i) {
    a[i] = __float2bfloat16(static_cast<float>(i % 7) - 3);
    b[i] = __float2bfloat16(static_cast<float>(i % 5) - 2);
  }
  launch(dim3(1), dim3(32), 0, [&] {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 1.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);  // column-major: element (k, n) at b[n * 16 + k]
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
  });
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 16; ++n) {
      float want = 1.0f;
      for (int k = 0; k < 16; ++k) {
        want += __bfloat162float(a[m * 16 + k]) * __bfloat162float(b[n * 16 + k]);
      }
      ASSERT_EQ(c[m * 16 + n], want) << m << "," << n;
    }
  }
}

TEST(CudaEmuDeathTest, WhatTheGpuWouldRefuseStops) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A wmma pointer off the 256-bit alignment the hardware needs.
  alignas(128) static float tile[17 * 16];
  EXPECT_DEATH(launch(dim3(1), dim3(32), 0,
                      [] {
                        nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
                        nvcuda::wmma::load_matrix_sync(f, tile + 4, 16,
                                                       nvcuda::wmma::mem_row_major);
                      }),
               "not 256-bit aligned");
  EXPECT_DEATH(launch(dim3(1), dim3(2048), 0, [] {}), "1..1024 threads");
  EXPECT_DEATH(launch(dim3(1), dim3(32), 300 * 1024, [] {}), "at most 227 KB");
}

}  // namespace
}  // namespace prefixgate::kernels
