// The cpu device's building blocks, one operation each, on row-major fp32 matrices. Tested one
// by one against plain loops (tests/engine/cpu_device_kernels_test.cpp).
#pragma once

#include <cstddef>

namespace prefixgate::engine::cpu {

// C = alpha * A B^T. A: [m, k] (row stride lda), B: [n, k] (ldb), C: [m, n] (ldc).
// OpenBLAS sgemm, or sgemv when m == 1: its small-matrix sgemm path is several times slower
// than gemv for the single rows of decode.
void gemm_nt(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
             std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc);
// C = A B. A: [m, k] (lda), B: [k, n] (ldb), C: [m, n] (ldc); sgemv when m == 1.
void gemm_nn(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
             const float* b, std::size_t ldb, float* c, std::size_t ldc);

// y = x W^T. x: [rows, in], w: [out, in] (PyTorch's Linear layout), y: [rows, out].
void linear(const float* x, std::size_t rows, std::size_t in, const float* w, std::size_t out,
            float* y);

// out[r] = x[r] / rms(x[r]) * weight, rms = sqrt(mean(x^2) + eps). x, out: [rows, dim]
// (may alias), weight: [dim].
void rms_norm(const float* x, const float* weight, std::size_t rows, std::size_t dim, double eps,
              float* out);

// Rotary embedding, Hugging Face's rotate-half convention: within each head the pairs are
// (i, i + head_dim/2), rotated by angle position * inv_freq[i].
// x: [rows, heads, head_dim], cos/sin: [rows, head_dim / 2] for each row's position.
void apply_rope(float* x, std::size_t rows, std::size_t heads, std::size_t head_dim,
                const float* cos, const float* sin);

// gate = silu(gate) * up, elementwise over n values; silu(g) = g / (1 + e^-g).
void silu_mul(float* gate, const float* up, std::size_t n);

// x[i] = e^(x[i] - shift) where x[i] - shift <= 0 (a softmax after subtracting the maximum).
// A branch-free polynomial the compiler vectorises; relative error below 4e-7 against std::exp
// down to e^-87, and results below that are clamped to e^-87 (~1.6e-38, nil after the sum).
void exp_shifted(float* x, std::size_t n, float shift);

// In-place softmax of row[0, valid); row[valid, width) is set to 0 (causally masked keys).
void softmax_masked(float* row, std::size_t valid, std::size_t width);

}  // namespace prefixgate::engine::cpu
