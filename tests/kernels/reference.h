// CPU references of the kernels (kernels/include/prefixgate/kernels/params.h), on host arrays in
// the kernels' own layouts, built on the cpu device's operations (engine/src/cpu_device_kernels.h)
// where one exists. The kernel tests compare each kernel, emulated or on a GPU, against these.
#pragma once

#include <cstdint>
#include <vector>

#include "prefixgate/kernels/params.h"

namespace prefixgate::kernels::reference {

std::vector<float> widen(const std::vector<std::uint16_t>& bf16);
std::vector<std::uint16_t> narrow(const std::vector<float>& values);

// residual += add (when given); returns rms_norm(residual[rows]) * weight, in fp32.
std::vector<float> rms_norm(std::vector<float>& residual, const std::vector<float>* add,
                            const std::vector<float>& weight, int dim, double eps,
                            const std::vector<std::int32_t>* rows_index);

// silu(gate) * up from [rows, 2 * inter] bf16.
std::vector<float> silu_mul(const std::vector<std::uint16_t>& gate_up, int rows, int inter);

// cos/sin tables [T, half] for positions, as the cpu device makes them (angles in double).
void rope_table(const std::vector<std::int32_t>& positions, const std::vector<double>& inv_freq,
                std::vector<float>& cos, std::vector<float>& sin);

// q and k rotated in fp32: qkv [T, (H + 2G) * D] -> rotated copy (v untouched).
std::vector<float> rope(const std::vector<std::uint16_t>& qkv, int heads, int kv_heads, int dim,
                        const std::vector<float>& cos, const std::vector<float>& sin);

// The K (kind 0) or V (1) vector of (page, head, slot) from a pool, dequantized to fp32.
std::vector<float> read_kv(const KvCacheView& view, std::int64_t page, int kind, int head,
                           int slot);

// Attention of one query head over positions [0, keys) of a sequence, K/V read through its
// page table; in double. q: [D] fp32. Returns [D].
std::vector<double> attend(const KvCacheView& view, const std::int32_t* page_table, int kv_head,
                           const float* q, int keys, float softmax_scale);

}  // namespace prefixgate::kernels::reference
