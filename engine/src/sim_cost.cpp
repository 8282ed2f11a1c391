// The sim device's cost model: a roofline per step (compute-bound FLOPs against memory-bound
// bytes) plus a fixed host overhead. The formulas are in sim_device.h; the constants and their
// sources in engine/SIM.md.
#include <algorithm>
#include <cmath>
#include <vector>

#include "prefixgate/base/check.h"
#include "prefixgate/engine/sim_device.h"

namespace prefixgate::engine {
namespace {

// BF16: 2 bytes per element, for every tensor but FP8 layer weights.
constexpr double kBf16Bytes = 2.0;
// CUDA context, cuBLAS/attention workspaces and CUDA graphs: memory the engine holds that is
// neither weights, activations nor KV. vLLM's startup log itemizes it as "non-torch memory" and
// "CUDA graph memory", each a fraction of a GiB on one GPU; 1 GiB covers both.
constexpr double kRuntimeReserveBytes = 1024.0 * 1024.0 * 1024.0;

double linear_weight_bytes(const SimProfile& profile) {
  return profile.weights == WeightDtype::kFp8 ? 1.0 : kBf16Bytes;
}

// FLOP/s the linear layers run at: FP8 weights use FP8 tensor cores where the GPU has them
// (W8A8, activations quantized per step); elsewhere they are dequantized to BF16 (weight-only
// FP8, as vLLM's Marlin kernels do on Ampere).
double linear_flops_rate(const SimProfile& profile) {
  if (profile.weights == WeightDtype::kFp8 && profile.gpu.fp8_flops > 0) {
    return profile.gpu.fp8_flops;
  }
  return profile.gpu.bf16_flops;
}

std::size_t kv_bytes_per_token(const ModelSpec& spec) {
  return spec.kv_bytes_per_token(2);
}

// Weight bytes a step streams from memory: everything but the embedding table, of which a step
// reads only the rows of its tokens. A tied lm_head is the embedding table, read in full.
double streamed_weight_bytes(const SimProfile& profile) {
  const ParameterBreakdown params = parameter_breakdown(profile.model);
  const double head = profile.model.tie_word_embeddings ? params.embedding : params.lm_head;
  return params.layer_linear * linear_weight_bytes(profile) + (params.norms + head) * kBf16Bytes;
}

}  // namespace

ParameterBreakdown parameter_breakdown(const ModelSpec& spec) {
  const double hidden = static_cast<double>(spec.hidden_size);
  const double q_width = static_cast<double>(spec.num_heads * spec.head_dim);
  const double kv_width = static_cast<double>(spec.num_kv_heads * spec.head_dim);
  const double intermediate = static_cast<double>(spec.intermediate_size);
  const double layers = static_cast<double>(spec.num_layers);
  const double vocab = static_cast<double>(spec.vocab_size);

  ParameterBreakdown out;
  // Per layer: wq [q_width, hidden], wk and wv [kv_width, hidden], wo [hidden, q_width],
  // w_gate and w_up [intermediate, hidden], w_down [hidden, intermediate].
  out.layer_linear =
      layers * (2.0 * q_width * hidden + 2.0 * kv_width * hidden + 3.0 * intermediate * hidden);
  out.norms = (2.0 * layers + 1.0) * hidden;
  out.embedding = vocab * hidden;
  out.lm_head = spec.tie_word_embeddings ? 0.0 : vocab * hidden;
  return out;
}

SimMemoryPlan sim_memory_plan(const SimProfile& profile) {
  const ParameterBreakdown params = parameter_breakdown(profile.model);
  const ModelSpec& spec = profile.model;
  SimMemoryPlan plan;
  plan.usable_bytes = profile.gpu.memory_bytes * profile.memory_utilization;
  plan.weight_bytes = params.layer_linear * linear_weight_bytes(profile) +
                      (params.norms + params.embedding + params.lm_head) * kBf16Bytes;
  // The largest live activations of a max_step_tokens step, in BF16: the MLP's gate and up
  // outputs and their product ([T, intermediate] three times) and about four [T, hidden]
  // buffers (residual, normed input, attention output, MLP output). vLLM sizes the same
  // reserve by profiling a forward pass of max_num_batched_tokens.
  const double activation_bytes = static_cast<double>(profile.max_step_tokens) *
                                  (3.0 * static_cast<double>(spec.intermediate_size) +
                                   4.0 * static_cast<double>(spec.hidden_size)) *
                                  kBf16Bytes;
  plan.reserve_bytes = kRuntimeReserveBytes + activation_bytes;
  plan.kv_bytes = plan.usable_bytes - plan.weight_bytes - plan.reserve_bytes;
  const std::size_t per_token = kv_bytes_per_token(spec);
  if (plan.kv_bytes > 0 && per_token > 0) {
    plan.kv_tokens =
        static_cast<std::size_t>(std::floor(plan.kv_bytes / static_cast<double>(per_token)));
  }
  return plan;
}

std::size_t kv_capacity_tokens(const SimProfile& profile) {
  return sim_memory_plan(profile).kv_tokens;
}

std::size_t kv_capacity_pages(const SimProfile& profile, std::size_t page_tokens) {
  PG_DCHECK(page_tokens > 0);
  return kv_capacity_tokens(profile) / page_tokens;
}

SimStepCost sim_step_cost(const SimProfile& profile, std::span<const SimSequenceWork> batch) {
  SimStepCost cost;
  if (batch.empty()) return cost;
  const ModelSpec& spec = profile.model;
  const ParameterBreakdown params = parameter_breakdown(spec);
  const double head_params = spec.tie_word_embeddings ? params.embedding : params.lm_head;
  // Per key, per query token, per head, per layer: QK^T and PV are each a head_dim-long dot
  // product, 2 FLOPs per multiply-add, hence 4 * head_dim.
  const double attention_per_key = 4.0 * static_cast<double>(spec.num_layers) *
                                   static_cast<double>(spec.num_heads) *
                                   static_cast<double>(spec.head_dim);

  double new_tokens = 0;
  double sampled = 0;
  double key_visits = 0;  // sum over new tokens of the keys each attends to
  double context_tokens = 0;
  for (const SimSequenceWork& seq : batch) {
    const double c = static_cast<double>(seq.cached_tokens);
    const double n = static_cast<double>(seq.new_tokens);
    new_tokens += n;
    sampled += seq.sampled ? 1.0 : 0.0;
    key_visits += n * c + n * (n + 1.0) / 2.0;
    context_tokens += c + n;
    cost.new_tokens += seq.new_tokens;
  }
  cost.sequences = batch.size();

  cost.linear_flops = 2.0 * params.layer_linear * new_tokens + 2.0 * head_params * sampled;
  cost.attention_flops = attention_per_key * key_visits;
  cost.compute_seconds = cost.linear_flops / (linear_flops_rate(profile) * profile.mfu) +
                         cost.attention_flops / (profile.gpu.bf16_flops * profile.mfu);

  cost.weight_bytes = streamed_weight_bytes(profile);
  cost.kv_bytes = static_cast<double>(kv_bytes_per_token(spec)) * context_tokens;
  cost.memory_seconds = (cost.weight_bytes + cost.kv_bytes) /
                        (profile.gpu.memory_bandwidth * profile.bandwidth_efficiency);

  cost.overhead_seconds = profile.step_overhead_seconds;
  cost.seconds = std::max(cost.compute_seconds, cost.memory_seconds) + cost.overhead_seconds;
  return cost;
}

DeviceSpeed sim_speed(const SimProfile& profile) {
  auto prefill = [&](std::size_t tokens) {
    const SimSequenceWork one{.cached_tokens = 0, .new_tokens = tokens, .sampled = true};
    return sim_step_cost(profile, std::span(&one, 1)).seconds;
  };
  auto decodes = [&](std::size_t sequences) {
    const std::vector<SimSequenceWork> batch(
        sequences, SimSequenceWork{.cached_tokens = 2048, .new_tokens = 1, .sampled = true});
    return sim_step_cost(profile, batch).seconds;
  };
  DeviceSpeed speed;
  speed.prefill_seconds_per_token = (prefill(4096) - prefill(2048)) / 2048.0;
  speed.decode_seconds_per_sequence = (decodes(64) - decodes(32)) / 32.0;
  return speed;
}

}  // namespace prefixgate::engine
