// The Anthropic Messages API request (POST /v1/messages), validated and converted into the Chat
// Completions request it is equivalent to (chat_conversion.h), so that a conversation sent
// through either API renders through a model's chat template into the same tokens.
//
//   auto m = canon::parse_messages_request(body);
//   if (!m) return reply(http_status(m.error()), anthropic_error_body(m.error()));
//   auto chat = canon::parse_request_value(m->chat.body, canon::Endpoint::kChatCompletions);
//
// Mapping (request fields; what a field not listed does: nothing, it is accepted and dropped):
//   system (string, or text blocks)  -> a first message {"role": "system"}
//   messages[].role user, assistant  -> the same role (a "system" message likewise)
//   content: a string, or one text block -> content as a string; several blocks -> content
//     parts: text -> {"type": "text"}, image (base64 or url source) -> {"type": "image_url",
//     "image_url": {"url": "data:MEDIA;base64,DATA" or the url}}
//   tool_use blocks (assistant)      -> that message's tool_calls, in order: {"id", "type":
//     "function", "function": {"name", "arguments": the input as compact JSON}}; an assistant
//     message of tool calls alone has "content": null
//   tool_result blocks (user)        -> one {"role": "tool", "tool_call_id", "content"} message
//     each, in place (text blocks around them become user messages); content as above
//     (is_error is dropped: Chat Completions has no such field)
//   thinking, redacted_thinking      -> dropped
//   tools[] {name, description, input_schema} -> {"function": {"description", "name",
//     "parameters": input_schema}, "type": "function"} (members in RFC 8785 order, so that
//     canonicalizing it changes only the schema)
//   tool_choice auto / any / tool / none -> "auto" / "required" / {"type": "function",
//     "function": {"name"}} / "none"; disable_parallel_tool_use -> parallel_tool_calls: false
//   max_tokens (required, >= 1), stop_sequences -> max_tokens, stop
//   temperature, top_p, top_k, stream -> the same (stream adds stream_options.include_usage)
//   metadata.user_id -> user (consistent_hash's session key)
//   cache_salt, ignore_eos (extensions, as on prefixgate's and vLLM's chat requests) -> the same
//   cache_control on a system block, a tool, a message block, or at the top level (the last
//     block) -> ChatConversion::breakpoints
// Refused (400, Error::param names the field): a missing or ill-typed field, an unknown role or
// block type, a server tool (a `type` other than "custom"), duplicate tool names, images inside
// a tool_result, documents, max_tokens 0.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {

struct MessagesRequest {
  json::Value body;     // as the client sent it
  ChatConversion chat;  // the equivalent Chat Completions request
  std::string model;
  bool stream = false;
  std::size_t max_tokens = 0;
  std::vector<std::string> stop_sequences;
  std::string user_id;  // metadata.user_id, "" when absent
};

// Parses and validates a /v1/messages body. Errors name the field ("messages[2].content[0].id").
Result<MessagesRequest> parse_messages_request(std::string_view body,
                                               const RequestLimits& limits = {});
// The same, also giving each top-level member's bytes as the client sent them (as
// parse_request's `source`): a proxy forwards what canonicalization left alone as it came, and
// the tool-list memo knows a list it has seen by them.
Result<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits,
                                               std::vector<json::SourceMember>& source);
Result<MessagesRequest> parse_messages_request_value(json::Value body,
                                                     const RequestLimits& limits = {});

}  // namespace prefixgate::canon
