#include "prefixgate/canonicalize/responses_reply.h"

#include "reply_internal.h"

namespace prefixgate::canon {
namespace {

std::string_view base_of(std::string_view response_id) {
  if (response_id.starts_with("resp_")) response_id.remove_prefix(5);
  return response_id;
}

json::Value or_null(const json::Value& body, std::string_view key) {
  const json::Value* v = body.find(key);
  return v != nullptr ? *v : json::Value();
}

}  // namespace

std::string message_item_id(std::string_view response_id) {
  return "msg_" + std::string(base_of(response_id));
}

std::string call_item_id(std::string_view response_id, std::size_t index) {
  return "fc_" + std::string(base_of(response_id)) + "_" + std::to_string(index);
}

std::string fallback_call_id(std::string_view response_id, std::size_t index) {
  return "call_" + std::string(base_of(response_id)) + "_" + std::to_string(index);
}

std::string_view response_status(std::string_view finish_reason) {
  return finish_reason == "length" || finish_reason == "content_filter" ? "incomplete"
                                                                        : "completed";
}

json::Object responses_echo(const json::Value& body) {
  const json::Value* parallel = body.find("parallel_tool_calls");
  const json::Value* tool_choice = body.find("tool_choice");
  const json::Value* tools = body.find("tools");
  const json::Value* metadata = body.find("metadata");
  return json::Object{{"instructions", or_null(body, "instructions")},
                      {"max_output_tokens", or_null(body, "max_output_tokens")},
                      {"parallel_tool_calls", parallel != nullptr ? *parallel : json::Value(true)},
                      {"previous_response_id", json::Value()},
                      {"store", false},
                      {"temperature", or_null(body, "temperature")},
                      {"text", json::Object{{"format", json::Object{{"type", "text"}}}}},
                      {"tool_choice", tool_choice != nullptr ? *tool_choice : json::Value("auto")},
                      {"tools", tools != nullptr ? *tools : json::Value(json::Array{})},
                      {"top_p", or_null(body, "top_p")},
                      {"truncation", "disabled"},
                      {"metadata", metadata != nullptr ? *metadata : json::Value(json::Object{})},
                      {"user", or_null(body, "user")}};
}

json::Value responses_usage_json(const ChatUsage& usage) {
  return json::Object{
      {"input_tokens", count_value(usage.prompt_tokens)},
      {"input_tokens_details", json::Object{{"cached_tokens", count_value(usage.cached_tokens)}}},
      {"output_tokens", count_value(usage.completion_tokens)},
      {"output_tokens_details", json::Object{{"reasoning_tokens", 0}}},
      {"total_tokens", count_value(usage.prompt_tokens + usage.completion_tokens)}};
}

std::string echo_members(const json::Object& echo) {
  std::string out;
  for (const json::Member& m : echo) {
    if (!out.empty()) out += ',';
    json::append_quoted(m.key, out);
    out += ':';
    json::append_json(m.value, out);
  }
  return out;
}

void write_response_members(JsonObjectWriter& object, const ResponsesReplyContext& ctx,
                            std::string_view echo, std::string_view model, std::string_view status,
                            const json::Array& output, const std::optional<ChatUsage>& usage,
                            std::string_view finish_reason) {
  object.string("id", ctx.id)
      .string("object", "response")
      .value("created_at", json::Value(static_cast<double>(ctx.created_at)))
      .string("status", status)
      .null("error");
  if (status == "incomplete") {
    object.open("incomplete_details")
        .string("reason", finish_reason == "length" ? "max_output_tokens" : "content_filter")
        .close();
  } else {
    object.null("incomplete_details");
  }
  object.string("model", model).array("output", output).members(echo);
  if (usage) {
    object.value("usage", responses_usage_json(*usage));
  } else {
    object.null("usage");
  }
}

std::string responses_body(const ChatReply& reply, const ResponsesReplyContext& ctx) {
  json::Array output;
  if (!reply.text.empty() || reply.tool_calls.empty()) {
    output.push_back(
        json::Object{{"id", message_item_id(ctx.id)},
                     {"type", "message"},
                     {"status", "completed"},
                     {"role", "assistant"},
                     {"content", json::Array{json::Object{{"type", "output_text"},
                                                          {"text", reply.text},
                                                          {"annotations", json::Array{}},
                                                          {"logprobs", json::Array{}}}}}});
  }
  for (std::size_t k = 0; k < reply.tool_calls.size(); ++k) {
    const ChatToolCall& call = reply.tool_calls[k];
    output.push_back(
        json::Object{{"id", call_item_id(ctx.id, k)},
                     {"type", "function_call"},
                     {"status", "completed"},
                     {"call_id", call.id.empty() ? fallback_call_id(ctx.id, k) : call.id},
                     {"name", call.name},
                     {"arguments", call.arguments}});
  }
  std::string out;
  JsonObjectWriter object(out);
  write_response_members(object, ctx, echo_members(ctx.echo),
                         ctx.model.empty() ? reply.model : ctx.model,
                         response_status(reply.finish_reason), output,
                         reply.usage.value_or(ChatUsage{}), reply.finish_reason);
  object.end();
  return out;
}

}  // namespace prefixgate::canon
