// The cpu device: a real Llama forward pass in fp32 on the host, over a paged KV cache it owns.
// Projections and the MLP run as OpenBLAS sgemm over every new token of the batch at once;
// attention reads each sequence's K/V through its page table, so a cached prefix costs nothing
// but reading it.
//
//   auto model = engine::load_model("builtin:small");
//   auto dev = engine::make_cpu_device(*model);
//   dev->init_kv_cache(/*num_pages=*/512, /*page_tokens=*/16);
//   engine::StepOutput out = dev->execute(batch);
#pragma once

#include <memory>

#include "prefixgate/engine/device.h"
#include "prefixgate/engine/model.h"

namespace prefixgate::engine {

// `threads`: worker threads for the forward pass; 0 means one per hardware thread. The device
// splits its GEMMs and attention over them itself and sets OpenBLAS to one thread, a
// process-wide setting (so that BLAS's own workers do not compete for the same cores). The
// device shares `model`'s weights.
std::unique_ptr<Device> make_cpu_device(const Model& model, int threads = 0);

}  // namespace prefixgate::engine
