// The invariants every device relies on in a batch the scheduler hands it. A scheduler that
// broke them would corrupt memory, so a violation stops the process loudly in every build.
#pragma once

#include <cstddef>
#include <span>

#include "prefixgate/engine/device.h"

namespace prefixgate::engine {

struct BatchLimits {
  std::size_t vocab_size = 0;
  std::size_t num_pages = 0;
  std::size_t page_tokens = 0;
};

// Every step has tokens, ids in the vocabulary, pages covering its positions with ids in the
// pool, and SamplingParams where it samples. `device` names the device in the message.
void check_batch(const char* device, std::span<const SequenceStep> batch,
                 const BatchLimits& limits);

}  // namespace prefixgate::engine
