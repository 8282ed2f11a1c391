// The token counts an upstream's answer reports in its `usage`, in any of the three APIs'
// shapes: chat ({"prompt_tokens", "completion_tokens", "prompt_tokens_details":
// {"cached_tokens"}}), Messages (input, cache_read and cache_creation input tokens, output
// tokens) and Responses ({"input_tokens", "output_tokens", "input_tokens_details":
// {"cached_tokens"}}). Read from a parsed usage object, or from a whole answer's text without
// building its tree (every non-streamed answer is read this way).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::server {

struct UsageCounts {
  std::size_t prompt = 0;      // the whole prompt, cached part included
  std::size_t cached = 0;      // of which the replica had cached
  std::size_t completion = 0;  // generated
};

// From a usage object; nullopt when it is not an object.
std::optional<UsageCounts> usage_counts(const json::Value& usage);
// From an answer's text, reading only its root member `usage`; nullopt when the text is not a
// JSON object or its usage is missing, not an object or malformed.
std::optional<UsageCounts> answer_usage_counts(std::string_view answer);

// Whether a streamed chunk's text may hold a `usage` object: some `{` follows `"usage"` and a
// colon, with any whitespace between. A filter before parsing, so it may say yes to a chunk
// whose content only quotes such text, and never says no to one that holds usage. Most chunks
// hold none and open few objects, so it looks at each `{` rather than at every quote the
// content holds (a scan for the quoted key was a third of the instructions relaying an event).
bool event_may_carry_usage(std::string_view event);

}  // namespace prefixgate::gateway::server
