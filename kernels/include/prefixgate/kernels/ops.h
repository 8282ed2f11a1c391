// Ops: what the engine's cuda device asks of a GPU: memory, copies, the kernels of params.h and
// bf16 GEMMs. Two implementations run the same kernel source:
//   make_cuda_ops()  the GPU: cudaMalloc'd memory, one stream, nvcc-built kernels, cuBLASLt;
//   make_emu_ops()   the CPU: host memory, the kernels run by the CUDA emulator, a reference
//                    GEMM. Slow; it exists so that CI, which has no GPU, runs the cuda device
//                    and every kernel for real.
//
//   auto ops = kernels::make_cuda_ops();           // or make_emu_ops()
//   if (!ops.ok) return fail(ops.error);           // no GPU, no driver, ...
//   void* x = ops.ops->alloc(bytes);
//   ops.ops->rms_norm({...});
//   ops.ops->synchronize();
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "prefixgate/kernels/params.h"

namespace prefixgate::kernels {

struct MemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  // "NVIDIA H200 (sm_90, 132 SMs)" or "cuda emulator (cpu)".
  virtual std::string name() const = 0;
  virtual bool is_gpu() const = 0;
  virtual int multiprocessor_count() const = 0;
  virtual MemoryInfo memory_info() const = 0;

  // Device memory (cudaMalloc on the GPU, never managed memory); null when it does not fit.
  virtual void* alloc(std::size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Page-locked host memory for copies that overlap compute; null when refused.
  virtual void* alloc_host(std::size_t bytes) = 0;
  virtual void free_host(void* ptr) = 0;
  // Copies and kernels run in order on one stream; `src` of an upload must stay valid until the
  // next synchronize(). copy_to_host() returns once the data is on the host.
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  virtual void synchronize() = 0;

  virtual void embedding(const EmbeddingParams& p) = 0;
  virtual void rms_norm(const RmsNormParams& p) = 0;
  virtual void silu_mul(const SiluMulParams& p) = 0;
  virtual void rope_table(const RopeTableParams& p) = 0;
  virtual void rope_kv_write(const RopeKvParams& p) = 0;
  virtual void decode_attention(const DecodeAttentionParams& p) = 0;
  virtual void prefill_attention(const PrefillAttentionParams& p) = 0;
  virtual void argmax(const ArgmaxParams& p) = 0;
  virtual void fill_random(const FillRandomParams& p) = 0;
  virtual void gemm(const GemmParams& p) = 0;

  // Milliseconds the stream spends on `work`, by events around it (GPU), or wall time (emu).
  virtual double time_ms(const std::function<void()>& work) = 0;

  // Graphs (CUDA graphs on the GPU): between begin_capture() and end_capture(), kernels and
  // GEMMs are recorded instead of run; replay() runs the recording again with the same
  // parameters (pointers and shapes, by value), so new inputs travel only through the memory
  // they point to. One launch instead of hundreds: what a decode step of a small batch is short
  // of. No copy or synchronize() may come in between. end_capture() returns the graph's id, or
  // -1 when capture failed (the caller then runs the work itself).
  virtual bool begin_capture() = 0;
  virtual int end_capture() = 0;
  virtual void replay(int graph) = 0;
  virtual void release_graph(int graph) = 0;
};

struct OpsResult {
  std::unique_ptr<Ops> ops;
  bool ok = false;
  std::string error;  // why there is no GPU to use
};

// The GPU `device` (cudaSetDevice). Fails cleanly, with the CUDA runtime's reason, where there is
// no GPU or driver, or where this build has no CUDA (PREFIXGATE_CUDA off).
OpsResult make_cuda_ops(int device = 0);
std::unique_ptr<Ops> make_emu_ops();
// Whether this build compiled the CUDA kernels (nvcc found, PREFIXGATE_CUDA on).
bool built_with_cuda();

}  // namespace prefixgate::kernels
