// The ceiling of a workload: the prompt-token hit rate of one unbounded prefix cache that sees
// every request in order. No routing can beat it; every measured hit rate is read as a fraction
// of it.
//
// It is computed over exactly what the engine caches: the request rendered and tokenized as the
// engine does it (canonicalize/'s analyze_prompt, the same template, tokenizer and block size;
// token-id prompts as they are), pages of `block_size` tokens, and the engine's rule that the
// last prompt token always runs (a prompt of n tokens can hit at most floor((n-1)/B) pages).
// Every full page of every prompt is then cached.
//
//   bench::PrefixCeiling c(16);
//   c.add(hashes, prompt_tokens, /*count=*/true);
//   c.hit_rate();
#pragma once

#include <boost/unordered/unordered_flat_set.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_format.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/render.h"
#include "prefixgate/canonicalize/request.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "workload.h"

namespace prefixgate::bench {

// The pure core: an unbounded set of chained block hashes.
class PrefixCeiling {
 public:
  explicit PrefixCeiling(std::size_t block_size) : block_size_(block_size) {}
  // Looks the prompt up, then caches its full blocks. Returns the tokens it would hit. `count`
  // false (a warm-up request) caches without counting.
  std::size_t add(std::span<const std::uint64_t> block_hashes, std::size_t prompt_tokens,
                  bool count = true);
  std::size_t prompt_tokens() const { return prompt_tokens_; }
  std::size_t hit_tokens() const { return hit_tokens_; }
  double hit_rate() const;

 private:
  std::size_t block_size_;
  boost::unordered_flat_set<std::uint64_t> blocks_;  // open addressing: 100M+ blocks at scale
  std::size_t prompt_tokens_ = 0;
  std::size_t hit_tokens_ = 0;
};

struct CeilingModel {
  const canon::Tokenizer* tokenizer = nullptr;
  canon::ChatFormat chat_format;  // built-in llama-3, or the model's own template
  std::size_t block_size = 16;
  std::string model_id = "builtin:tiny";
  // Applied to each request before it is rendered: what the gateway rewrites before the engine
  // sees it. CanonicalizationPolicy::none() for the request as sent.
  canon::CanonicalizationPolicy policy = canon::CanonicalizationPolicy::none();
};

struct CeilingResult {
  double hit_rate = 0;
  std::size_t prompt_tokens = 0;
  std::size_t hit_tokens = 0;
};

// The order the ceiling sees requests in: sessions by arrival (index order when the load
// generator assigns arrivals), turn by turn across sessions (every session's first turn, then
// every second turn, ...), a stand-in for the interleaving a run produces.
std::vector<const Turn*> nominal_order(const Workload& workload);

// A turn as the chat or completion request it renders as: a Messages or Responses request by
// its Chat Completions equivalent, as the gateway and the engine render it.
Result<canon::ParsedRequest> parse_turn(const Turn& turn);

// The first `warmup` requests of the nominal order are cached but not counted, as a run does.
Result<CeilingResult> compute_ceiling(const Workload& workload, const CeilingModel& model,
                                      std::size_t warmup = 0, std::size_t max_requests = 0);

}  // namespace prefixgate::bench
