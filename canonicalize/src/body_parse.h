// The JSON document of a request body, shared by every API's parser (chat and completions,
// Messages, Responses): the body-size limit first, and each top-level member's bytes as the
// client sent them for callers that forward unchanged members as they came (a proxy's body
// writer) or remember work by a member's bytes (the tool-list memo).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon::internal {

// kTooLarge past limits.max_body_bytes, the parser's error for bad JSON. With `source`, it gets
// one entry per top-level member of an object body, in order (nothing for another root).
Result<json::Value> parse_body(std::string_view body, const RequestLimits& limits,
                               std::vector<json::SourceMember>* source);

// parse_body, then `from_value(document)`: each API's parser of a body's text.
template <class FromValue>
auto parse_body_with(std::string_view body, const RequestLimits& limits,
                     std::vector<json::SourceMember>* source, FromValue&& from_value)
    -> decltype(from_value(json::Value{})) {
  auto doc = parse_body(body, limits, source);
  if (!doc) return doc.error();
  return from_value(std::move(*doc));
}

}  // namespace prefixgate::canon::internal
