#include "prefixgate/canonicalize/chat_conversion.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "json_element_memo.h"

namespace prefixgate::canon {
namespace {

using json::Value;

bool is_anthropic_block(const Value& block) {
  if (!block.is_object()) return false;
  if (block.find("cache_control") != nullptr) return true;
  const Value* type = block.find("type");
  if (type == nullptr || !type->is_string()) return false;
  const std::string& t = type->as_string();
  return t == "tool_use" || t == "tool_result" || (t == "image" && block.find("source"));
}

bool has_anthropic_feature(const Value& body) {
  for (const char* key :
       {"system", "stop_sequences", "metadata", "anthropic_version", "cache_control", "thinking"}) {
    if (body.find(key) != nullptr) return true;
  }
  if (const Value* tools = body.find("tools"); tools != nullptr && tools->is_array()) {
    for (const Value& t : tools->as_array()) {
      if (t.is_object() && t.find("input_schema") != nullptr) return true;
    }
  }
  const Value* messages = body.find("messages");
  if (messages == nullptr || !messages->is_array()) return false;
  for (const Value& m : messages->as_array()) {
    const Value* content = m.is_object() ? m.find("content") : nullptr;
    if (content == nullptr || !content->is_array()) continue;
    for (const Value& block : content->as_array()) {
      if (is_anthropic_block(block)) return true;
    }
  }
  return false;
}

// The value at `path`: for a Value, a walk for writing (each shared tree it passes through gets a
// copy of its own, json.h); for a const Value, a read that changes nothing, which a comparison
// needs.
template <class V>
V* resolve(V& root, const JsonPath& path) {
  V* v = &root;
  for (const PathStep& step : path) {
    if (step.is_index) {
      if (!v->is_array() || step.index >= v->as_array().size()) return nullptr;
      v = &v->as_array()[step.index];
    } else {
      v = v->find(step.key);
      if (v == nullptr) return nullptr;
    }
  }
  return v;
}

const std::string* name_of(const Value& tool) {
  const Value* fn = tool.find("function");
  const Value* name = (fn != nullptr ? fn : &tool)->find("name");
  return name != nullptr && name->is_string() ? &name->as_string() : nullptr;
}

// Tools in the canonical order, each the client's definition with the canonical schema and
// description. Returns whether it rebuilt the client's list.
bool write_back_tools(const ChatConversion& conversion, const Value& canonical, Value& client) {
  const Value* chat_tools = canonical.find("tools");
  Value* client_tools = client.find("tools");
  if (chat_tools == nullptr || !chat_tools->is_array() || client_tools == nullptr ||
      !client_tools->is_array() ||
      chat_tools->as_array().size() != client_tools->as_array().size()) {
    return false;
  }
  json::Array rebuilt;
  for (const Value& chat_tool : chat_tools->as_array()) {
    const std::string* name = name_of(chat_tool);
    const Value* fn = chat_tool.find("function");
    const auto& list = client_tools->as_array();
    const auto it = std::find_if(list.begin(), list.end(), [&](const Value& t) {
      const std::string* n = t.is_object() ? name_of(t) : nullptr;
      return name != nullptr && n != nullptr && *n == *name;
    });
    if (fn == nullptr || it == list.end()) return false;  // not a converted request: leave it
    Value tool = *it;
    if (const Value* params = fn->find("parameters")) tool.set(conversion.tool_schema_key, *params);
    if (const Value* description = fn->find("description")) tool.set("description", *description);
    rebuilt.push_back(std::move(tool));
  }
  *client_tools = Value(std::move(rebuilt));
  return true;
}

// The text a chat message holds at `part` (-1: its string content), or nullptr.
const std::string* chat_text(const Value& message, int part) {
  const Value* content = message.find("content");
  if (content == nullptr) return nullptr;
  if (part < 0) return content->is_string() ? &content->as_string() : nullptr;
  if (!content->is_array() || static_cast<std::size_t>(part) >= content->as_array().size()) {
    return nullptr;
  }
  const Value* text = content->as_array()[static_cast<std::size_t>(part)].find("text");
  return text != nullptr && text->is_string() ? &text->as_string() : nullptr;
}

// "[12]..." -> 12 and the rest after ']'.
std::optional<std::pair<std::size_t, std::string_view>> take_index(std::string_view s) {
  if (!s.starts_with('[')) return std::nullopt;
  const std::size_t close = s.find(']');
  if (close == std::string_view::npos) return std::nullopt;
  std::size_t value = 0;
  const auto [ptr, ec] = std::from_chars(s.data() + 1, s.data() + close, value);
  if (ec != std::errc() || ptr != s.data() + close) return std::nullopt;
  return std::pair{value, s.substr(close + 1)};
}

// Whether a segment rendered from `source` belongs to `field` (the field itself or inside it).
bool within(std::string_view source, std::string_view field) {
  if (!source.starts_with(field)) return false;
  return source.size() == field.size() || source[field.size()] == '.' ||
         source[field.size()] == '[';
}

std::optional<std::size_t> end_of(const RenderedPrompt& prompt, std::string_view field) {
  std::optional<std::size_t> end;
  for (const Segment& seg : prompt.segments) {
    if (within(seg.source, field)) end = seg.end;
  }
  return end;
}

}  // namespace

const char* api_name(Api api) {
  switch (api) {
    case Api::kChatCompletions: return "chat";
    case Api::kCompletions: return "completions";
    case Api::kMessages: return "messages";
    case Api::kResponses: return "responses";
  }
  return "chat";
}

std::optional<Api> api_from_name(std::string_view name) {
  for (Api api : {Api::kChatCompletions, Api::kCompletions, Api::kMessages, Api::kResponses}) {
    if (name == api_name(api)) return api;
  }
  return std::nullopt;
}

const char* api_path(Api api) {
  switch (api) {
    case Api::kChatCompletions: return "/v1/chat/completions";
    case Api::kCompletions: return "/v1/completions";
    case Api::kMessages: return "/v1/messages";
    case Api::kResponses: return "/v1/responses";
  }
  return "/v1/chat/completions";
}

std::optional<Api> api_for_path(std::string_view path) {
  for (Api api : {Api::kChatCompletions, Api::kCompletions, Api::kMessages, Api::kResponses}) {
    if (path == api_path(api)) return api;
  }
  return std::nullopt;
}

std::optional<Api> guess_api(const json::Value& body) {
  if (!body.is_object()) return std::nullopt;
  const bool has_messages = body.find("messages") != nullptr;
  if (!has_messages && (body.find("input") != nullptr || body.find("instructions") != nullptr)) {
    return Api::kResponses;
  }
  if (has_messages) return has_anthropic_feature(body) ? Api::kMessages : Api::kChatCompletions;
  if (body.find("prompt") != nullptr) return Api::kCompletions;
  return std::nullopt;
}

std::string path_text(const JsonPath& path) {
  std::string out;
  for (const PathStep& step : path) {
    if (step.is_index) {
      out += "[" + std::to_string(step.index) + "]";
    } else {
      if (!out.empty()) out += '.';
      out += step.key;
    }
  }
  return out;
}

std::string source_field(const ChatConversion& conversion, std::string_view chat_field) {
  if (chat_field.starts_with("tools[")) {
    const auto index = take_index(chat_field.substr(5));
    return index ? "tools[" + std::to_string(index->first) + "]" : std::string(chat_field);
  }
  if (!chat_field.starts_with("messages[")) return std::string(chat_field);
  const auto index = take_index(chat_field.substr(8));
  if (!index || index->first >= conversion.messages.size()) return std::string(chat_field);
  const MessageOrigin& origin = *conversion.messages[index->first];
  std::string_view rest = index->second;
  if (rest.starts_with(".content")) {
    rest.remove_prefix(8);
    int part = -1;
    if (const auto p = take_index(rest)) part = static_cast<int>(p->first);
    for (const PartOrigin& po : origin.parts) {
      if (po.part == part) return path_text(po.source);
    }
  } else if (rest.starts_with(".tool_calls")) {
    const auto call = take_index(rest.substr(11));
    if (call && call->first < origin.tool_calls.size()) {
      return path_text(origin.tool_calls[call->first]);
    }
  }
  return path_text(origin.source);
}

std::vector<std::string> write_back(const ChatConversion& conversion,
                                    const ParsedRequest& canonical, json::Value& client_body,
                                    bool tools) {
  std::vector<std::string> changed;
  const auto note = [&](const std::string& member) {
    if (std::find(changed.begin(), changed.end(), member) == changed.end()) {
      changed.push_back(member);
    }
  };
  if (tools && write_back_tools(conversion, canonical.body, client_body)) note("tools");
  const Value* messages = canonical.body.find("messages");
  const Value* converted = conversion.body.find("messages");
  if (messages != nullptr && messages->is_array()) {
    const json::Array& list = messages->as_array();
    for (std::size_t i = 0; i < conversion.messages.size() && i < list.size(); ++i) {
      // A message canonicalization left as the conversion made it (the same shared tree, which
      // nothing changes: a converted turn kept for the next request) holds the client's texts.
      if (converted != nullptr && converted->is_array() && i < converted->as_array().size() &&
          list[i].is_shared() && converted->as_array()[i].is_shared() &&
          json::internal::tree_identity(list[i]) ==
              json::internal::tree_identity(converted->as_array()[i])) {
        continue;
      }
      for (const PartOrigin& po : conversion.messages[i]->parts) {
        if (!po.is_text) continue;
        const std::string* text = chat_text(list[i], po.part);
        const Value* current = resolve(std::as_const(client_body), po.source);
        if (text == nullptr || current == nullptr || !current->is_string()) continue;
        if (current->as_string() == *text) continue;
        resolve(client_body, po.source)->as_string() = *text;
        if (!po.source.empty()) note(po.source.front().key);
      }
    }
  }
  return changed;
}

std::vector<std::size_t> breakpoint_bytes(const ChatConversion& conversion,
                                          const ParsedRequest& chat, const RenderedPrompt& prompt) {
  std::vector<std::size_t> out;
  for (const Breakpoint& bp : conversion.breakpoints) {
    std::string field = bp.chat_field;
    if (!bp.tool_name.empty()) {
      const auto it = std::find_if(chat.tools.begin(), chat.tools.end(),
                                   [&](const ToolDef& t) { return t.name == bp.tool_name; });
      if (it == chat.tools.end()) continue;
      field = it->path;
    }
    std::optional<std::size_t> end = end_of(prompt, field);
    if (!end && field.starts_with("messages[")) {
      end = end_of(prompt, std::string_view(field).substr(0, field.find(']') + 1));
    }
    if (end) out.push_back(*end);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::size_t breakpoint_tokens(const ChatConversion& conversion, const ParsedRequest& chat,
                              const AnalyzedPrompt& prompt) {
  const std::vector<std::size_t> bytes = breakpoint_bytes(conversion, chat, prompt.rendered);
  if (bytes.empty() || bytes.back() == 0 || prompt.tokens.size() == 0) return 0;
  return std::min(prompt.token_at_byte(bytes.back() - 1) + 1, prompt.tokens.size());
}

}  // namespace prefixgate::canon
