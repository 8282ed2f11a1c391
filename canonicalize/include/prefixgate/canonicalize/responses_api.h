// The OpenAI Responses API request (POST /v1/responses), the stateless subset agents use,
// validated and converted into the Chat Completions request it is equivalent to
// (chat_conversion.h), so that a conversation sent through either API renders into the same
// tokens.
//
//   auto r = canon::parse_responses_request(body);
//   if (!r) return reply(http_status(r.error()), openai_error_body(r.error()));
//   auto chat = canon::parse_request_value(r->chat.body, canon::Endpoint::kChatCompletions);
//
// Mapping (a field not listed is accepted and dropped):
//   instructions (a string)          -> a first message {"role": "system"}
//   input: a string                  -> one user message
//   input items:
//     {"type": "message" (or none), "role": user | assistant | system | developer, "content"}
//        -> that message; content a string, or parts: input_text / output_text -> text
//        (one text part alone is string content), input_image -> {"type": "image_url"},
//        refusal -> {"type": "refusal"}
//     function_call {call_id, name, arguments} -> a tool_calls entry of an assistant message;
//        consecutive calls, and calls right after an assistant message, join one message
//     function_call_output {call_id, output} -> {"role": "tool", "tool_call_id", "content"}
//     reasoning                      -> dropped
//   tools[] {"type": "function", name, description, parameters, strict} -> {"function":
//     {"description", "name", "parameters", "strict"}, "type": "function"}
//   tool_choice auto / none / required / {"type": "function", "name"} -> the chat equivalent
//   parallel_tool_calls, temperature, top_p -> the same; max_output_tokens -> max_tokens
//   stream -> the same, with stream_options.include_usage
//   user, else prompt_cache_key -> user (consistent_hash's session key); cache_salt, ignore_eos
//     (extensions, as on prefixgate's and vLLM's chat requests) -> the same
// Refused with 400 (Error::param names the field): previous_response_id and conversation
// (nothing is stored: send the whole conversation), store: true, background: true,
// item_reference items and built-in tools (web_search, file_search, ...), a text.format other
// than text, input files and audio, duplicate tool names, and ill-typed fields.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {

struct ResponsesRequest {
  json::Value body;     // as the client sent it
  ChatConversion chat;  // the equivalent Chat Completions request
  std::string model;
  bool stream = false;
  std::optional<std::size_t> max_output_tokens;
};

// Parses and validates a /v1/responses body. Errors name the field ("input[3].call_id").
Result<ResponsesRequest> parse_responses_request(std::string_view body,
                                                 const RequestLimits& limits = {});
// The same, also giving each top-level member's bytes as the client sent them (as
// parse_request's `source`).
Result<ResponsesRequest> parse_responses_request(std::string_view body, const RequestLimits& limits,
                                                 std::vector<json::SourceMember>& source);
Result<ResponsesRequest> parse_responses_request_value(json::Value body,
                                                       const RequestLimits& limits = {});

}  // namespace prefixgate::canon
