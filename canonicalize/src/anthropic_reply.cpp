#include "prefixgate/canonicalize/anthropic_reply.h"

#include <algorithm>

#include "reply_internal.h"

namespace prefixgate::canon {
std::string fallback_tool_id(std::string_view message_id, std::size_t index) {
  std::string_view base = message_id;
  if (base.starts_with("msg_")) base.remove_prefix(4);
  return "toolu_" + std::string(base) + "_" + std::to_string(index);
}

json::Value tool_input(std::string_view arguments) {
  auto parsed = json::parse(arguments);
  if (parsed && parsed->is_object()) return std::move(*parsed);
  return json::Value(json::Object{});
}

MessagesUsage messages_usage(const ChatUsage& usage, std::size_t breakpoint_tokens) {
  MessagesUsage out;
  const std::size_t prompt = usage.prompt_tokens;
  out.cache_read_input_tokens = std::min(usage.cached_tokens, prompt);
  const std::size_t declared = std::min(breakpoint_tokens, prompt);
  out.cache_creation_input_tokens =
      declared > out.cache_read_input_tokens ? declared - out.cache_read_input_tokens : 0;
  out.input_tokens = prompt - out.cache_read_input_tokens - out.cache_creation_input_tokens;
  out.output_tokens = usage.completion_tokens;
  return out;
}

json::Value messages_usage_json(const MessagesUsage& usage) {
  return json::Object{
      {"input_tokens", count_value(usage.input_tokens)},
      {"cache_creation_input_tokens", count_value(usage.cache_creation_input_tokens)},
      {"cache_read_input_tokens", count_value(usage.cache_read_input_tokens)},
      {"output_tokens", count_value(usage.output_tokens)}};
}

MessagesStop messages_stop(const ChatReply& reply, const std::vector<std::string>& stop_sequences) {
  const std::string& f = reply.finish_reason;
  if (f == "tool_calls" || f == "function_call" || (!reply.tool_calls.empty() && f == "stop")) {
    return {"tool_use", std::nullopt};
  }
  if (f == "length") return {"max_tokens", std::nullopt};
  if (f == "content_filter") return {"refusal", std::nullopt};
  if (!reply.stop_string.empty() && std::find(stop_sequences.begin(), stop_sequences.end(),
                                              reply.stop_string) != stop_sequences.end()) {
    return {"stop_sequence", reply.stop_string};
  }
  return {"end_turn", std::nullopt};
}

std::string messages_body(const ChatReply& reply, const MessagesReplyContext& ctx) {
  json::Array content;
  if (!reply.text.empty()) content.push_back(json::Object{{"type", "text"}, {"text", reply.text}});
  for (std::size_t k = 0; k < reply.tool_calls.size(); ++k) {
    const ChatToolCall& call = reply.tool_calls[k];
    content.push_back(json::Object{{"type", "tool_use"},
                                   {"id", call.id.empty() ? fallback_tool_id(ctx.id, k) : call.id},
                                   {"name", call.name},
                                   {"input", tool_input(call.arguments)}});
  }
  const MessagesStop stop = messages_stop(reply, ctx.stop_sequences);
  json::Object body{{"id", ctx.id},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", ctx.model.empty() ? reply.model : ctx.model},
                    {"content", json::Value(std::move(content))},
                    {"stop_reason", stop.reason},
                    {"stop_sequence", stop.sequence ? json::Value(*stop.sequence) : json::Value()},
                    {"usage", messages_usage_json(messages_usage(reply.usage.value_or(ChatUsage{}),
                                                                 ctx.breakpoint_tokens))}};
  return json::to_json(json::Value(std::move(body)));
}

const char* messages_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: break;
  }
  return status >= 500 ? "api_error" : "invalid_request_error";
}

std::string messages_error_body(int status, std::string_view message) {
  std::string out = R"({"type":"error","error":{"type":")";
  out += messages_error_type(status);
  out += R"(","message":)";
  json::append_quoted(message, out);
  out += "}}";
  return out;
}

std::string error_message_of(std::string_view body) {
  auto doc = json::parse(body);
  if (doc && doc->is_object()) {
    const json::Value* error = doc->find("error");
    if (error != nullptr && error->is_object()) {
      const json::Value* message = error->find("message");
      if (message != nullptr && message->is_string()) return message->as_string();
    }
    if (error != nullptr && error->is_string()) return error->as_string();
  }
  return std::string(body.substr(0, 512));
}

}  // namespace prefixgate::canon
