// What the Messages and Responses reply writers share (anthropic_reply.cpp,
// anthropic_stream.cpp, responses_reply.cpp, responses_stream.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "json_object_writer.h"
#include "prefixgate/canonicalize/chat_reply.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/responses_reply.h"

namespace prefixgate::canon {

// The tool_use id for a call the chat reply gave none: "toolu_<message id>_<index>".
std::string fallback_tool_id(std::string_view message_id, std::size_t index);
// A tool call's arguments as a tool_use input: the JSON object they spell, else {}.
json::Value tool_input(std::string_view arguments);

// The echoed request fields (ResponsesReplyContext::echo) as JSON members, "k":v,... : written
// once for a reply whose events repeat them.
std::string echo_members(const json::Object& echo);
// A Responses object's members, written into `object`: id, object, created_at, status, error,
// incomplete_details (from finish_reason), model, output, the echoed request fields
// (echo_members()), usage (null until known).
void write_response_members(JsonObjectWriter& object, const ResponsesReplyContext& ctx,
                            std::string_view echo, std::string_view model, std::string_view status,
                            const json::Array& output, const std::optional<ChatUsage>& usage,
                            std::string_view finish_reason);
// "completed", or "incomplete" for finish_reason length and content_filter.
std::string_view response_status(std::string_view finish_reason);
// Item ids: "msg_<base>", "fc_<base>_<k>"; a call id for a call the chat reply gave none.
std::string message_item_id(std::string_view response_id);
std::string call_item_id(std::string_view response_id, std::size_t index);
std::string fallback_call_id(std::string_view response_id, std::size_t index);

inline json::Value count_value(std::size_t n) {
  return json::Value(static_cast<double>(n));
}

}  // namespace prefixgate::canon
