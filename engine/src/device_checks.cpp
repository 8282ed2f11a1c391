#include "device_checks.h"

#include <string>

#include "prefixgate/base/check.h"

namespace prefixgate::engine {

void check_batch(const char* device, std::span<const SequenceStep> batch,
                 const BatchLimits& limits) {
  // The messages are built only when a check fails.
  const auto says = [device](const char* what) { return std::string(device) + ": " + what; };
  PG_CHECK(limits.page_tokens > 0, says("init_kv_cache() before execute()"));
  for (const SequenceStep& step : batch) {
    PG_CHECK(!step.tokens.empty(), says("a step has at least one token"));
    for (canon::TokenId t : step.tokens) {
      PG_CHECK(t < limits.vocab_size, says("token id < vocab_size"));
    }
    const std::size_t end = step.start_position + step.tokens.size();
    PG_CHECK(step.pages.size() * limits.page_tokens >= end,
             says("pages cover every position of the step"));
    for (std::size_t p = 0; p < (end + limits.page_tokens - 1) / limits.page_tokens; ++p) {
      PG_CHECK(step.pages[p] < limits.num_pages, says("page id < num_pages"));
    }
    PG_CHECK(!step.sample || step.sampling != nullptr, says("a sampling step has SamplingParams"));
  }
}

}  // namespace prefixgate::engine
