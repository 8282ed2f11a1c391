#include "device_checks.h"

#include <cstdio>
#include <cstdlib>

namespace prefixgate::engine {
namespace {

void require(bool ok, const char* device, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: broken invariant: %s\n", device, what);
    std::abort();
  }
}

}  // namespace

void check_batch(const char* device, std::span<const SequenceStep> batch,
                 const BatchLimits& limits) {
  require(limits.page_tokens > 0, device, "init_kv_cache() before execute()");
  for (const SequenceStep& step : batch) {
    require(!step.tokens.empty(), device, "a step has at least one token");
    for (canon::TokenId t : step.tokens)
      require(t < limits.vocab_size, device, "token id < vocab_size");
    const std::size_t end = step.start_position + step.tokens.size();
    require(step.pages.size() * limits.page_tokens >= end, device,
            "pages cover every position of the step");
    for (std::size_t p = 0; p < (end + limits.page_tokens - 1) / limits.page_tokens; ++p) {
      require(step.pages[p] < limits.num_pages, device, "page id < num_pages");
    }
    require(!step.sample || step.sampling != nullptr, device, "a sampling step has SamplingParams");
  }
}

}  // namespace prefixgate::engine
