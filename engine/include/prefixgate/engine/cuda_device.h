// The cuda device: the Llama forward pass on a GPU through kernels/ (Ops). Weights live in GPU
// memory as bf16 (q/k/v and gate/up fused into one GEMM each); the paged KV pool is bf16 or e4m3
// with per-token scales; norms and the residual stream stay fp32. The same class runs on the CPU
// emulator's Ops in tests, which is how CI checks it against the cpu device without a GPU.
//
//   auto ops = kernels::make_cuda_ops();                  // kernels/ops.h
//   if (!ops.ok) return fail(ops.error);
//   auto dev = engine::make_cuda_device(model, std::move(ops.ops), {.kv_dtype = ...});
//   if (!dev.ok()) return fail(dev.error().message);
//   std::size_t pages = engine::kv_pages_for_utilization(**dev, 0.9, 16);
//   (*dev)->init_kv_cache(pages, 16);
#pragma once

#include <cstdint>
#include <memory>

#include "prefixgate/base/status.h"
#include "prefixgate/engine/device.h"
#include "prefixgate/engine/model.h"
#include "prefixgate/kernels/ops.h"

namespace prefixgate::engine {

struct CudaDeviceOptions {
  kernels::KvDtype kv_dtype = kernels::KvDtype::kBf16;
  // Activation buffers are sized for this many tokens and sampled sequences per step when the
  // device starts (so that the KV pool, sized after, leaves room for them); a larger step grows
  // them.
  std::size_t max_batch_tokens = 2048;
  std::size_t max_seqs = 64;
  // Copy every sampled row's logits into StepOutput::logits (tests). Off when serving: 0.5 MB
  // per row at a 128k vocabulary would cost more than the step.
  bool return_logits = false;
  // Replay decode steps from CUDA graphs, one per step shape (see kernels::Ops). Falls back to
  // direct launches if the runtime refuses a capture.
  bool cuda_graphs = true;
  // Decode page tables are padded to a multiple of this many pages, so that a decode step's
  // shape (and graph) changes every 1,024 tokens at 16 per page, not every page.
  std::size_t decode_width_quantum_pages = 64;
};

class CudaDevice : public Device {
 public:
  // Device memory free now (after weights and activation buffers).
  virtual std::size_t free_memory_bytes() const = 0;
  virtual const kernels::Ops& ops() const = 0;
  virtual std::size_t weight_bytes() const = 0;
  // Turns decode graphs on or off from the next step (benchmarks compare the two).
  virtual void set_cuda_graphs(bool on) = 0;
};

// Weights from a loaded model (fp32 on the host, rounded to bf16 on upload). Errors: a shape the
// kernels do not support, or weights that do not fit in GPU memory.
Result<std::unique_ptr<CudaDevice>> make_cuda_device(const Model& model,
                                                     std::unique_ptr<kernels::Ops> ops,
                                                     const CudaDeviceOptions& options);

// Weights generated on the GPU from `seed` (uniform, scaled like internal::generate_weights):
// for benchmarks of large shapes, which would take minutes to generate and copy from the host.
Result<std::unique_ptr<CudaDevice>> make_generated_cuda_device(const ModelSpec& spec,
                                                               std::uint64_t seed,
                                                               std::unique_ptr<kernels::Ops> ops,
                                                               const CudaDeviceOptions& options);

// KV pages that `fraction` of the device's free memory holds (--gpu-memory-utilization).
std::size_t kv_pages_for_utilization(std::size_t free_bytes, double fraction,
                                     std::size_t page_bytes);

}  // namespace prefixgate::engine
