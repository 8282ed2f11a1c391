#include "prefixgate/canonicalize/chat_reply.h"

#include "chat_count.h"
#include "field_checks.h"

namespace prefixgate::canon {
namespace {

using json::Value;

std::size_t count(const Value& object, std::string_view key) {
  const Value* v = object.find(key);
  return v != nullptr && v->is_number() ? chat_count(v->as_number().value) : 0;
}

std::string string_member(const Value& object, std::string_view key) {
  const Value* v = object.find(key);
  return v != nullptr && v->is_string() ? v->as_string() : std::string();
}

Error not_chat(std::string_view what) {
  return make_error(ErrorCode::kInternal,
                    "the upstream's reply is not a chat completion: " + std::string(what));
}

// Reads the first choice's message (or delta) into `out`.
Status read_choice(const Value& body, const char* message_key, ChatReply& out) {
  const Value* choices = body.find("choices");
  if (choices == nullptr || !choices->is_array()) return not_chat("no choices");
  if (choices->as_array().empty()) return {};
  const Value& choice = choices->as_array().front();
  if (!choice.is_object()) return not_chat("a choice is not an object");
  out.finish_reason = string_member(choice, "finish_reason");
  out.stop_string = string_member(choice, "stop_reason");  // a token id (a number) is no string
  const Value* message = checks::present(choice, message_key);
  if (message == nullptr) return {};
  if (!message->is_object()) return not_chat(std::string(message_key) + " is not an object");
  out.text = string_member(*message, "content");
  const Value* calls = checks::present(*message, "tool_calls");
  if (calls == nullptr) return {};
  if (!calls->is_array()) return not_chat("tool_calls is not an array");
  for (std::size_t i = 0; i < calls->as_array().size(); ++i) {
    const Value& call = calls->as_array()[i];
    if (!call.is_object()) return not_chat("a tool call is not an object");
    ChatToolCall c;
    const Value* index = call.find("index");
    c.index = index != nullptr && index->is_number() ? count(call, "index") : i;
    c.id = string_member(call, "id");
    if (const Value* fn = checks::present(call, "function"); fn != nullptr && fn->is_object()) {
      c.name = string_member(*fn, "name");
      c.arguments = string_member(*fn, "arguments");
    }
    out.tool_calls.push_back(std::move(c));
  }
  return {};
}

Result<ChatReply> parse(const Value& body, const char* message_key) {
  if (!body.is_object()) return not_chat("not a JSON object");
  ChatReply out;
  out.id = string_member(body, "id");
  out.model = string_member(body, "model");
  if (Status s = read_choice(body, message_key, out); !s) return s.error();
  if (const Value* usage = checks::present(body, "usage")) out.usage = parse_chat_usage(*usage);
  return out;
}

}  // namespace

std::optional<ChatUsage> parse_chat_usage(const json::Value& usage) {
  if (!usage.is_object()) return std::nullopt;
  ChatUsage out;
  out.prompt_tokens = count(usage, "prompt_tokens");
  out.completion_tokens = count(usage, "completion_tokens");
  if (const Value* d = usage.find("prompt_tokens_details"); d != nullptr && d->is_object()) {
    out.cached_tokens = count(*d, "cached_tokens");
  }
  return out;
}

Result<ChatReply> parse_chat_reply(const json::Value& body) {
  return parse(body, "message");
}

Result<ChatReply> parse_chat_chunk(const json::Value& chunk) {
  return parse(chunk, "delta");
}

}  // namespace prefixgate::canon
