// nvcuda::wmma (warp matrix multiply-accumulate on tensor cores) for the CUDA emulator, at the
// level of its documented API: a fragment's element-to-lane mapping is unspecified in CUDA, so
// kernels only load, store, fill and multiply whole fragments. Here every lane holds the whole
// tile, which satisfies that contract: each lane's loads, stores and products give the tile's
// values, and a kernel that followed the contract computes the same thing as on the GPU.
// The *_sync operations are warp rendezvous, as on the GPU: every lane has loaded its inputs
// before any lane goes on (to a store that overwrites them, say).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_emu.h"
#include "prefixgate/base/check.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K>
struct fragment_shape;
template <int M, int N, int K>
struct fragment_shape<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct fragment_shape<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct fragment_shape<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N;
};

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int rows = fragment_shape<Use, M, N, K>::rows;
  static constexpr int cols = fragment_shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];  // row-major, whatever the memory layout it was loaded from
};

namespace detail {
// What the GPU requires of a wmma load or store (CUDA C++ Programming Guide, "Warp Matrix
// Functions"): a 256-bit aligned pointer, and a leading dimension that is a multiple of 16
// bytes. Where the GPU's behaviour is undefined, the emulator stops.
template <class T>
void check_matrix(const T* p, unsigned ldm) {
  PG_CHECK(reinterpret_cast<std::uintptr_t>(p) % 32 == 0,
           "cuda emulator: a wmma pointer is not 256-bit aligned");
  PG_CHECK(ldm * sizeof(T) % 16 == 0,
           "cuda emulator: wmma ldm " + std::to_string(ldm) + " is not a multiple of 16 bytes");
}

inline float to_float(float v) {
  return v;
}
inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, T value) {
  for (T& v : f.x) v = value;
}

// matrix_a / matrix_b: the layout is the fragment's type parameter.
template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm) {
  detail::check_matrix(p, ldm);
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r) {
    for (int c = 0; c < F::cols; ++c) {
      f.x[r * F::cols + c] = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r];
    }
  }
  ::prefixgate::kernels::emu_rt::sync_warp();
}

// accumulator: the layout is an argument.
template <int M, int N, int K, class T>
void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm,
                      layout_t layout) {
  detail::check_matrix(p, ldm);
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      f.x[r * N + c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
    }
  }
  ::prefixgate::kernels::emu_rt::sync_warp();
}

template <int M, int N, int K, class T>
void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                       layout_t layout) {
  detail::check_matrix(p, ldm);
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r * N + c];
    }
  }
  ::prefixgate::kernels::emu_rt::sync_warp();
}

// d = a b + c, accumulated in fp32.
template <int M, int N, int K, class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d,
              const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  float out[M * N];
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      float sum = c.x[m * N + n];
      for (int k = 0; k < K; ++k) {
        sum += detail::to_float(a.x[m * K + k]) * detail::to_float(b.x[k * N + n]);
      }
      out[m * N + n] = sum;
    }
  }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma
