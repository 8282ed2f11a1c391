// The host launchers of the kernels, declared once for each build of the kernel source: the
// nvcc build (namespace cuda) and the CPU emulator build (namespace emu). `stream` is a
// cudaStream_t (ignored by the emulator). Ops (ops.h) is the public face of these.
#pragma once

#include "prefixgate/kernels/params.h"

#define PREFIXGATE_KERNEL_LAUNCHERS                                      \
  void embedding(const EmbeddingParams& p, void* stream);                \
  void rms_norm(const RmsNormParams& p, void* stream);                   \
  void silu_mul(const SiluMulParams& p, void* stream);                   \
  void rope_table(const RopeTableParams& p, void* stream);               \
  void rope_kv_write(const RopeKvParams& p, void* stream);               \
  void decode_attention(const DecodeAttentionParams& p, void* stream);   \
  void prefill_attention(const PrefillAttentionParams& p, void* stream); \
  void argmax(const ArgmaxParams& p, void* stream);                      \
  void fill_random(const FillRandomParams& p, void* stream);

namespace prefixgate::kernels::cuda {
PREFIXGATE_KERNEL_LAUNCHERS
}  // namespace prefixgate::kernels::cuda
namespace prefixgate::kernels::emu {
PREFIXGATE_KERNEL_LAUNCHERS
}  // namespace prefixgate::kernels::emu

namespace prefixgate::kernels {
// A launch with a shape the kernels were not built for: a caller's broken invariant (the cuda
// device checks shapes with unsupported_attention_shape() when it starts). Aborts loudly.
[[noreturn]] void unsupported_shape(const char* what);
}  // namespace prefixgate::kernels
