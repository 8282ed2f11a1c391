// The device backend: runs one step of the model over a batch of sequences against the paged
// KV cache. The scheduler decides what runs; a device only computes (cpu), models the time a
// GPU would take (sim), or runs kernels (cuda). No device touches the scheduler's state.
//
//   auto dev = engine::make_cpu_device(spec_and_weights);
//   dev->init_kv_cache(num_pages, 16);
//   engine::StepOutput out = dev->execute(batch);   // out.tokens[i] for each sampled sequence
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "prefixgate/engine/model_spec.h"
#include "prefixgate/engine/page_pool.h"
#include "prefixgate/engine/sampling.h"

namespace prefixgate::engine {

// One sequence's share of a step.
struct SequenceStep {
  // Tokens whose K/V this step computes and writes: a prefill chunk, or the one token a decode
  // step feeds back. Positions are [start_position, start_position + tokens.size()).
  std::span<const canon::TokenId> tokens = {};
  // Tokens before `tokens` whose K/V is already in `pages` (cached prefix + earlier chunks).
  std::size_t start_position = 0;
  // Page table: page i holds positions [i * page_tokens, (i + 1) * page_tokens). Covers at
  // least start_position + tokens.size() positions.
  std::span<const PageId> pages = {};
  // Sample the next token after the last of `tokens` (the last prefill chunk, or decode).
  bool sample = false;
  const SamplingParams* sampling = nullptr;  // required when `sample`
  std::uint64_t sample_step = 0;             // index of the token being generated
};

struct StepOutput {
  // One token per sequence with `sample`, in batch order (0 for the others).
  std::vector<canon::TokenId> tokens;
  // The logits each sampled token was drawn from: [number of sampled steps, vocab_size], in
  // batch order. Filled by devices that compute logits (cpu, cuda), for tests and logprobs;
  // empty from the sim device.
  std::vector<float> logits;
};

// How fast a device serves, in wall-clock seconds, for routers that compare replicas of
// different speeds (the gateway's cost in seconds). 0: not known.
struct DeviceSpeed {
  double prefill_seconds_per_token = 0;    // one more prompt token in a prefill step
  double decode_seconds_per_sequence = 0;  // one more running sequence in a decode step
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  virtual const ModelSpec& spec() const = 0;

  // Bytes one KV page of `page_tokens` tokens takes on this device.
  virtual std::size_t kv_page_bytes(std::size_t page_tokens) const = 0;
  // Allocates the KV pool. Called once, before execute().
  virtual void init_kv_cache(std::size_t num_pages, std::size_t page_tokens) = 0;

  // Runs the model over `batch`: writes K/V for every step's tokens into its pages and samples
  // where asked. Steps of one call are independent sequences.
  virtual StepOutput execute(std::span<const SequenceStep> batch) = 0;

  // What the load reports announce (kv_events "load" lines); unknown unless a device knows.
  virtual DeviceSpeed speed() const { return {}; }
};

}  // namespace prefixgate::engine
