// Sampling parameters and the sampler shared by the devices that compute logits.
//
// Deterministic: the random draw for a sequence's n-th generated token depends only on the
// request's seed and n, so a preempted and recomputed sequence, or one served from cache,
// produces the same text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  int top_k = 0;  // 0: off
  std::uint64_t seed = 0;
  std::size_t max_tokens = 16;
  std::vector<std::string> stop = {};  // checked on the decoded text by the engine loop
  bool ignore_eos = false;
};

// Picks a token from `logits` ([vocab_size]) for the `step`-th generated token.
canon::TokenId sample_token(std::span<const float> logits, const SamplingParams& params,
                            std::uint64_t step);

}  // namespace prefixgate::engine
