// The sim device: a replica that behaves like a GPU serving a real model, on a machine without
// one. The engine's real scheduler and radix KV cache drive it exactly as they drive the cpu and
// cuda devices; instead of computing, each step waits for the time a roofline cost model says
// the chosen GPU would take, and emits deterministic tokens. Cached prefixes are cheap because
// the scheduler hands the device fewer new tokens, not because the sim knows about caching: it
// sees only what the real cache and scheduler decided. See engine/SIM.md for the formulas, the
// constants and their sources.
//
//   auto profile = engine::parse_sim_profile("h100:llama3-8b");   // GPU:MODEL[@bf16|@fp8]
//   if (!profile) return fail(profile.error());                   // lists the choices
//   auto device = engine::make_sim_device(*profile, /*speedup=*/10.0);
//   device->init_kv_cache(engine::kv_capacity_pages(*profile, 16), 16);
//   engine::StepOutput out = device->execute(batch);  // sleeps sim_step_cost(...) / 10
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "prefixgate/engine/device.h"
#include "prefixgate/engine/model_spec.h"

namespace prefixgate::engine {

// ---------------------------------------------------------------------------------------------
// Profiles: a GPU, a model shape, and the efficiency constants of the cost model.

// Peak rates and capacity from the vendor datasheet (dense, i.e. without 2:4 sparsity).
struct GpuSpec {
  std::string name;             // "h100-sxm"
  double bf16_flops = 0;        // dense BF16 tensor-core FLOP/s
  double fp8_flops = 0;         // dense FP8 tensor-core FLOP/s; 0 where the GPU has none
  double memory_bandwidth = 0;  // bytes/s of device memory (HBM or GDDR)
  double memory_bytes = 0;      // device memory capacity in bytes
};

// How the decoder layers' linear weights are stored. The embedding, lm_head, norms and the KV
// cache stay BF16 in both cases, as in published FP8 checkpoints (lm_head is left unquantized).
enum class WeightDtype { kBf16, kFp8 };

struct SimProfile {
  std::string name;  // canonical "gpu:model@dtype", e.g. "h100-sxm:llama3-8b@bf16"
  GpuSpec gpu;
  ModelSpec model;
  WeightDtype weights = WeightDtype::kBf16;

  // Fraction of peak FLOP/s a whole prefill step achieves (model FLOPs utilization).
  double mfu = 0.55;
  // Fraction of peak memory bandwidth a memory-bound decode step achieves.
  double bandwidth_efficiency = 0.8;
  // Fixed host-side cost of every step (scheduling, input preparation, sampling, launch).
  double step_overhead_seconds = 0.002;
  // Share of device memory the engine may use (vLLM's --gpu-memory-utilization default).
  double memory_utilization = 0.9;
  // The largest step, in tokens; sizes the activation reserve.
  std::size_t max_step_tokens = 8192;
};

// "GPU:MODEL" or "GPU:MODEL@DTYPE" (DTYPE bf16 or fp8), e.g. "h100:llama3-8b",
// "h200:llama3-70b", "a100:builtin:tiny", "h100:llama3-8b@fp8". The model name may itself hold
// a colon; the GPU is everything before the first one. Errors name the unknown part and list
// the choices, and a model whose weights leave no room for one full-length sequence of KV is
// refused with the numbers and what to try instead.
Result<SimProfile> parse_sim_profile(std::string_view text);

// The names parse_sim_profile accepts, canonical names first then aliases.
std::vector<std::string> sim_gpu_names();
std::vector<std::string> sim_model_names();

// "N" (N > 0, finite) for a clock N times faster than real time, or "inf" for the virtual
// clock: no sleeping at all, for unit tests and cost-only runs.
Result<double> parse_sim_speedup(std::string_view text);

// ---------------------------------------------------------------------------------------------
// The cost model: pure functions of a profile and a batch's shape.

// Parameters of a Llama-architecture decoder, split by how a step uses them.
struct ParameterBreakdown {
  double layer_linear = 0;  // q, k, v, o, gate, up, down of every layer: one MAC per token
  double norms = 0;         // RMSNorm gains (2 per layer + the final one)
  double embedding = 0;     // the input table: a row lookup per token, not a matmul
  double lm_head = 0;       // the output projection; 0 when tied to the embedding
  double total() const { return layer_linear + norms + embedding + lm_head; }
};
ParameterBreakdown parameter_breakdown(const ModelSpec& spec);

// Device memory, all in bytes:
//   usable   = memory_bytes * memory_utilization
//   weights  = layer_linear * (1 or 2 bytes) + (norms + embedding + lm_head) * 2
//   reserve  = 1 GiB + max_step_tokens * (3 * intermediate + 4 * hidden) * 2
//   kv       = usable - weights - reserve            (may be negative: does not fit)
//   kv_tokens = floor(kv / kv_bytes_per_token),  kv_bytes_per_token = 2*layers*kv_heads*head_dim*2
struct SimMemoryPlan {
  double usable_bytes = 0;
  double weight_bytes = 0;
  double reserve_bytes = 0;
  double kv_bytes = 0;
  std::size_t kv_tokens = 0;
};
SimMemoryPlan sim_memory_plan(const SimProfile& profile);
std::size_t kv_capacity_tokens(const SimProfile& profile);
std::size_t kv_capacity_pages(const SimProfile& profile, std::size_t page_tokens);

// One sequence's share of a step, as the cost model sees it.
struct SimSequenceWork {
  std::size_t cached_tokens = 0;  // context already in the KV cache (SequenceStep::start_position)
  std::size_t new_tokens = 0;     // tokens computed this step (prefill chunk, or 1 for decode)
  bool sampled = false;           // runs lm_head on its last token
};

// The time one step takes on the profile's GPU. With L layers, H query heads, d = head_dim,
// P = layer_linear parameters, V*h = lm_head parameters, and per sequence s cached c_s, new n_s:
//
//   linear FLOPs    = 2 * P * sum_s n_s + 2 * V*h * (sequences sampled)
//   attention FLOPs = 4 * L * H * d * sum_s sum_{p=c_s}^{c_s+n_s-1} (p + 1)     causal: token p
//                   = 4 * L * H * d * sum_s (n_s * c_s + n_s * (n_s + 1) / 2)   sees p+1 keys
//   compute_seconds = linear / (linear_rate * mfu) + attention / (bf16_flops * mfu)
//                     (linear_rate = fp8_flops for FP8 weights on a GPU with FP8 tensor cores,
//                      else bf16_flops: weight-only FP8 dequantizes to BF16)
//   weight bytes    = resident weights but the embedding table (a tied lm_head is read), once
//   KV bytes        = kv_bytes_per_token * sum_s (c_s + n_s)    (read the context, write new)
//   memory_seconds  = (weight bytes + KV bytes) / (memory_bandwidth * bandwidth_efficiency)
//   seconds         = max(compute_seconds, memory_seconds) + step_overhead_seconds
//
// An empty batch costs nothing.
struct SimStepCost {
  double linear_flops = 0;
  double attention_flops = 0;
  double weight_bytes = 0;
  double kv_bytes = 0;
  double compute_seconds = 0;
  double memory_seconds = 0;
  double overhead_seconds = 0;
  double seconds = 0;
  std::size_t new_tokens = 0;
  std::size_t sequences = 0;
};
SimStepCost sim_step_cost(const SimProfile& profile, std::span<const SimSequenceWork> batch);

// The profile's marginal costs, from sim_step_cost (modelled seconds, before any speedup):
//   prefill_seconds_per_token   = (cost of a 4,096-token prefill - cost of 2,048) / 2,048
//   decode_seconds_per_sequence = (cost of 64 decodes at 2,048 tokens of context - cost of 32) / 32
// Marginal, so the fixed step overhead and the weights read once per step cancel out.
DeviceSpeed sim_speed(const SimProfile& profile);

// ---------------------------------------------------------------------------------------------
// The device.

// The token the sim emits after `last_token` for the token at `position`: a hash of the three
// inputs, drawn from the ordinary vocabulary [0, min(bos, eos)) (every catalog tokenizer puts
// its special tokens at the top), so it is never EOS: sequences end on max_tokens or stop
// strings. The same prefix and seed give the same token, so a preempted and recomputed
// sequence continues identically.
canon::TokenId sim_next_token(const ModelSpec& spec, canon::TokenId last_token,
                              std::size_t position, std::uint64_t seed);
// The same draw from `tokens` (non-empty): the token at the drawn index.
canon::TokenId sim_next_token(std::span<const canon::TokenId> tokens, canon::TokenId last_token,
                              std::size_t position, std::uint64_t seed);

// Runs no model. Owned and called by the single scheduler thread, like every device.
class SimDevice final : public Device {
 public:
  // speedup > 0; +infinity is the virtual clock (no sleeping).
  SimDevice(SimProfile profile, double speedup);

  std::string_view name() const override { return "sim"; }
  const ModelSpec& spec() const override { return profile_.model; }
  std::size_t kv_page_bytes(std::size_t page_tokens) const override;
  // num_pages may not exceed kv_capacity_pages(profile, page_tokens): the GPU has no more.
  void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) override;
  // Asserts that every step's page table covers its positions with pages of the pool, then
  // waits sim_step_cost(batch) / speedup and samples with sim_next_token.
  StepOutput execute(std::span<const SequenceStep> batch) override;
  // sim_speed(profile) / speedup: the wall-clock rates a router sees (0 with the virtual clock).
  DeviceSpeed speed() const override;

  // The vocabulary generated tokens come from, when the served tokenizer is not the profile
  // model's (the sim of llama3-8b behind the byte tokenizer of builtin:*): its ordinary tokens.
  // Costs still follow the profile's model.
  void set_output_vocabulary(const ModelSpec& tokenizer_model) { output_model_ = tokenizer_model; }
  // Narrows the output to these tokens (non-empty; the served tokenizer's standalone text
  // tokens), so what a sim replica streams is readable text, each token as it is sampled.
  void set_output_tokens(std::vector<canon::TokenId> tokens);
  // Positions a step may reach: the profile model's context, or the engine's --max-model-len
  // when that is longer. The sim computes no attention, only its cost, which is defined at any
  // length: benchmarks serve prompts longer than the modelled model's context this way (a 30 KB
  // prompt is 30,000 tokens for the byte tokenizer of builtin:*, whose context is 8,192).
  void set_max_model_len(std::size_t max_model_len);

  const SimProfile& profile() const { return profile_; }
  double speedup() const { return speedup_; }
  const SimStepCost& last_step() const { return last_step_; }
  std::uint64_t steps() const { return steps_; }
  // Sum of the modelled step times: what the run would have taken on the GPU.
  double simulated_seconds() const { return simulated_seconds_; }

 private:
  void wait(double simulated_seconds);

  SimProfile profile_;
  ModelSpec output_model_;  // vocabulary of generated tokens; the profile's model by default
  std::vector<canon::TokenId> output_tokens_;  // when set, generated tokens come from these
  double speedup_;
  std::size_t max_positions_;  // profile_.model.max_position, or a longer --max-model-len
  std::size_t num_pages_ = 0;
  std::size_t page_tokens_ = 0;
  std::vector<SimSequenceWork> work_;  // reused across steps
  SimStepCost last_step_;
  std::uint64_t steps_ = 0;
  double simulated_seconds_ = 0;
  // The clock: the previous step's deadline, and how late its sleep woke up (so that sleep
  // overshoot does not add up over back-to-back steps).
  bool clock_started_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::steady_clock::duration overshoot_{0};
};

std::unique_ptr<SimDevice> make_sim_device(const SimProfile& profile, double speedup);

}  // namespace prefixgate::engine
