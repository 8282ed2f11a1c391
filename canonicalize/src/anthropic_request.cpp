// Validation of Anthropic Messages bodies and their conversion into Chat Completions requests.
// Field rules follow Anthropic's API reference; the mapping is in anthropic.h.
#include <set>
#include <tuple>

#include "body_parse.h"
#include "conversion_builder.h"
#include "field_checks.h"
#include "prefixgate/canonicalize/anthropic.h"

namespace prefixgate::canon {
namespace {

using json::Value;
using namespace checks;

Status check_cache_control(const Value& owner, const std::string& path, bool& marked) {
  const Value* cc = present(owner, "cache_control");
  marked = cc != nullptr;
  if (cc != nullptr && !cc->is_object()) {
    return wrong_type(field_path(path, "cache_control"), "an object", *cc);
  }
  return {};
}

Result<const std::string*> string_field(const Value& object, const std::string& path,
                                        std::string_view key) {
  const Value* v = present(object, key);
  if (v == nullptr) return missing(field_path(path, key));
  if (!v->is_string()) return wrong_type(field_path(path, key), "a string", *v);
  return &v->as_string();
}

// {"type": "image", "source": {"type": "base64", "media_type", "data"} | {"type": "url", "url"}}
Result<Value> image_part(const Value& block, const std::string& path) {
  const Value* source = present(block, "source");
  const std::string source_path = field_path(path, "source");
  if (source == nullptr) return missing(source_path);
  if (!source->is_object()) return wrong_type(source_path, "an object", *source);
  auto type = string_field(*source, source_path, "type");
  if (!type) return type.error();
  std::string url;
  if (**type == "base64") {
    auto media = string_field(*source, source_path, "media_type");
    if (!media) return media.error();
    auto data = string_field(*source, source_path, "data");
    if (!data) return data.error();
    url = "data:" + **media + ";base64," + **data;
  } else if (**type == "url") {
    auto u = string_field(*source, source_path, "url");
    if (!u) return u.error();
    url = **u;
  } else {
    return unsupported(field_path(source_path, "type"),
                       "'" + **type + "' is not supported (base64 or url)");
  }
  return Value(json::Object{{"type", "image_url"}, {"image_url", json::Object{{"url", url}}}});
}

// A text or image block of a message (or tool result), validated.
Result<ContentBlock> content_block(const Value& block, const std::string& path, JsonPath at,
                                   bool images_allowed) {
  if (!block.is_object()) return wrong_type(path, "an object", block);
  auto type = string_field(block, path, "type");
  if (!type) return type.error();
  ContentBlock cb{.path = std::move(at), .source = path};
  if (Status s = check_cache_control(block, path, cb.breakpoint); !s) return s.error();
  if (**type == "text") {
    auto text = string_field(block, path, "text");
    if (!text) return text.error();
    cb.text = **text;
    cb.is_text = true;
  } else if (**type == "image") {
    if (!images_allowed) return unsupported(path, "images are not supported here");
    auto part = image_part(block, path);
    if (!part) return part.error();
    cb.part = std::move(*part);
  } else {
    return unsupported(field_path(path, "type"),
                       "'" + **type + "' is not supported here (text or image)");
  }
  return cb;
}

// A string, or an array of text (and, where allowed, image) blocks.
Status string_or_blocks(const Value& v, const std::string& path, const JsonPath& at,
                        bool images_allowed, std::vector<ContentBlock>& out) {
  if (v.is_string()) {
    out.push_back(ContentBlock{
        .path = at, .source = path, .text = v.as_string(), .is_text = true, .whole = true});
    return {};
  }
  if (!v.is_array()) return wrong_type(path, "a string or an array of content blocks", v);
  for (std::size_t i = 0; i < v.as_array().size(); ++i) {
    auto block =
        content_block(v.as_array()[i], index_path(path, i), with_index(at, i), images_allowed);
    if (!block) return block.error();
    out.push_back(std::move(*block));
  }
  return {};
}

Status convert_system(const Value& body, ConversionBuilder& b) {
  const Value* system = present(body, "system");
  if (system == nullptr) return {};
  std::vector<ContentBlock> blocks;
  if (Status s = string_or_blocks(*system, "system", {key_step("system")}, false, blocks); !s) {
    return s;
  }
  if (!blocks.empty()) b.add_content_message("system", blocks, {key_step("system")});
  return {};
}

// A tool_use block: {"id", "name", "input": {...}} -> a chat tool call.
Result<Value> tool_call(const Value& block, const std::string& path) {
  auto id = string_field(block, path, "id");
  if (!id) return id.error();
  auto name = string_field(block, path, "name");
  if (!name) return name.error();
  const Value* input = present(block, "input");
  if (input == nullptr) return missing(field_path(path, "input"));
  if (!input->is_object()) return wrong_type(field_path(path, "input"), "an object", *input);
  return Value(json::Object{
      {"id", **id},
      {"type", "function"},
      {"function", json::Object{{"name", **name}, {"arguments", json::to_json(*input)}}}});
}

Status convert_assistant(const Value& content, const std::string& path, const JsonPath& at,
                         ConversionBuilder& b) {
  if (content.is_string()) {
    b.add_content_message("assistant",
                          {ContentBlock{.path = at,
                                        .source = path,
                                        .text = content.as_string(),
                                        .is_text = true,
                                        .whole = true}},
                          at);
    return {};
  }
  if (!content.is_array())
    return wrong_type(path, "a string or an array of content blocks", content);
  std::vector<ContentBlock> texts;
  std::vector<ToolCallBlock> calls;
  for (std::size_t i = 0; i < content.as_array().size(); ++i) {
    const Value& block = content.as_array()[i];
    const std::string block_path = index_path(path, i);
    if (!block.is_object()) return wrong_type(block_path, "an object", block);
    auto type = string_field(block, block_path, "type");
    if (!type) return type.error();
    bool marked = false;
    if (Status s = check_cache_control(block, block_path, marked); !s) return s;
    if (**type == "text") {
      auto text = string_field(block, block_path, "text");
      if (!text) return text.error();
      texts.push_back(ContentBlock{.path = with_index(at, i),
                                   .source = block_path,
                                   .text = **text,
                                   .is_text = true,
                                   .breakpoint = marked});
    } else if (**type == "tool_use") {
      auto call = tool_call(block, block_path);
      if (!call) return call.error();
      calls.push_back(ToolCallBlock{std::move(*call), with_index(at, i), block_path, marked});
    } else if (**type == "thinking" || **type == "redacted_thinking") {
      continue;  // a model's reasoning: not part of any chat template's prompt
    } else {
      return unsupported(field_path(block_path, "type"),
                         "'" + **type + "' is not supported in an assistant message");
    }
  }
  b.add_assistant(texts, std::move(calls), at);
  return {};
}

// A tool_result block: {"tool_use_id", "content"?: string | text blocks, "is_error"?}.
Status convert_tool_result(const Value& block, const std::string& path, const JsonPath& at,
                           bool marked, ConversionBuilder& b) {
  auto id = string_field(block, path, "tool_use_id");
  if (!id) return id.error();
  if (const Value* e = present(block, "is_error"); e != nullptr && !e->is_bool()) {
    return wrong_type(field_path(path, "is_error"), "a boolean", *e);
  }
  std::vector<ContentBlock> blocks;
  if (const Value* content = present(block, "content")) {
    if (Status s = string_or_blocks(*content, field_path(path, "content"), with_key(at, "content"),
                                    false, blocks);
        !s) {
      return s;
    }
  }
  b.add_tool_result(**id, blocks, at, path, marked);
  return {};
}

Status convert_user(const Value& content, const std::string& path, const JsonPath& at,
                    ConversionBuilder& b) {
  if (content.is_string()) {
    b.add_content_message("user",
                          {ContentBlock{.path = at,
                                        .source = path,
                                        .text = content.as_string(),
                                        .is_text = true,
                                        .whole = true}},
                          at);
    return {};
  }
  if (!content.is_array())
    return wrong_type(path, "a string or an array of content blocks", content);
  if (content.as_array().empty()) return invalid(path, "must not be empty");
  std::vector<ContentBlock> pending;
  const auto flush = [&] {
    if (!pending.empty()) b.add_content_message("user", pending, at);
    pending.clear();
  };
  for (std::size_t i = 0; i < content.as_array().size(); ++i) {
    const Value& block = content.as_array()[i];
    const std::string block_path = index_path(path, i);
    if (!block.is_object()) return wrong_type(block_path, "an object", block);
    auto type = string_field(block, block_path, "type");
    if (!type) return type.error();
    if (**type == "tool_result") {
      bool marked = false;
      if (Status s = check_cache_control(block, block_path, marked); !s) return s;
      flush();
      if (Status s = convert_tool_result(block, block_path, with_index(at, i), marked, b); !s) {
        return s;
      }
      continue;
    }
    if (**type == "tool_use")
      return invalid(field_path(block_path, "type"), "is for assistant messages");
    auto got = content_block(block, block_path, with_index(at, i), true);
    if (!got) return got.error();
    pending.push_back(std::move(*got));
  }
  flush();
  return {};
}

Status convert_messages(const Value& body, const RequestLimits& limits, ConversionBuilder& b) {
  const Value* messages = present(body, "messages");
  if (messages == nullptr) return missing("messages");
  if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
  if (messages->as_array().empty()) return invalid("messages", "must not be empty");
  if (messages->as_array().size() > limits.max_messages) {
    return make_error(ErrorCode::kTooLarge,
                      "'messages' has " + std::to_string(messages->as_array().size()) +
                          " entries; the limit is " + std::to_string(limits.max_messages),
                      "messages");
  }
  // An earlier turn that the parser handed back as the tree it built before converted into
  // its chat messages before too (conversion_builder.h): they are added again, shared.
  for (std::size_t i = 0; i < messages->as_array().size(); ++i) {
    const Value& m = messages->as_array()[i];
    if (b.add_kept(m, i)) continue;
    const ConversionBuilder::Mark from = b.mark();
    const std::string path = index_path("messages", i);
    const JsonPath at{key_step("messages"), index_step(i)};
    if (!m.is_object()) return wrong_type(path, "an object", m);
    auto role = string_field(m, path, "role");
    if (!role) return role.error();
    const Value* content = present(m, "content");
    if (content == nullptr) return missing(field_path(path, "content"));
    const std::string content_path = field_path(path, "content");
    const JsonPath content_at = with_key(at, "content");
    Status s;
    if (**role == "user") {
      s = convert_user(*content, content_path, content_at, b);
    } else if (**role == "assistant") {
      s = convert_assistant(*content, content_path, content_at, b);
    } else if (**role == "system") {
      std::vector<ContentBlock> blocks;
      s = string_or_blocks(*content, content_path, content_at, false, blocks);
      if (s) b.add_content_message("system", blocks, at);
    } else {
      return invalid(field_path(path, "role"), "must be user or assistant, got '" + **role + "'");
    }
    if (!s) return s;
    b.keep_converted(m, from, i);
  }
  return {};
}

Status convert_tools(const Value& body, ConversionBuilder& b) {
  const Value* tools = present(body, "tools");
  if (tools == nullptr) return {};
  if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
  std::set<std::string> names;
  for (std::size_t i = 0; i < tools->as_array().size(); ++i) {
    const Value& tool = tools->as_array()[i];
    const std::string path = index_path("tools", i);
    if (!tool.is_object()) return wrong_type(path, "an object", tool);
    if (const Value* type = present(tool, "type"); type != nullptr) {
      if (!type->is_string()) return wrong_type(field_path(path, "type"), "a string", *type);
      if (type->as_string() != "custom") {
        return unsupported(field_path(path, "type"),
                           "'" + type->as_string() +
                               "' is a server tool, which is not supported; define it as a custom "
                               "tool (name, description, input_schema)");
      }
    }
    auto name = string_field(tool, path, "name");
    if (!name) return name.error();
    if ((*name)->empty()) return invalid(field_path(path, "name"), "is empty");
    if (!names.insert(**name).second) {
      return invalid(field_path(path, "name"), "repeats the tool name '" + **name + "'");
    }
    const Value* description = present(tool, "description");
    if (description != nullptr && !description->is_string()) {
      return wrong_type(field_path(path, "description"), "a string", *description);
    }
    const Value* schema = present(tool, "input_schema");
    if (schema == nullptr) return missing(field_path(path, "input_schema"));
    if (!schema->is_object()) {
      return wrong_type(field_path(path, "input_schema"), "an object", *schema);
    }
    bool marked = false;
    if (Status s = check_cache_control(tool, path, marked); !s) return s;
    b.add_tool(*tools, **name, description, schema, nullptr, path, marked);
  }
  return {};
}

Status convert_tool_choice(const Value& body, json::Object& chat) {
  const Value* choice = present(body, "tool_choice");
  if (choice == nullptr) return {};
  if (!choice->is_object()) return wrong_type("tool_choice", "an object", *choice);
  auto type = string_field(*choice, "tool_choice", "type");
  if (!type) return type.error();
  if (**type == "auto" || **type == "none") {
    chat.push_back({"tool_choice", **type});
  } else if (**type == "any") {
    chat.push_back({"tool_choice", "required"});
  } else if (**type == "tool") {
    auto name = string_field(*choice, "tool_choice", "name");
    if (!name) return name.error();
    chat.push_back({"tool_choice", json::Object{{"type", "function"},
                                                {"function", json::Object{{"name", **name}}}}});
  } else {
    return invalid("tool_choice.type", "must be auto, any, tool or none, got '" + **type + "'");
  }
  if (const Value* d = present(*choice, "disable_parallel_tool_use")) {
    if (!d->is_bool()) return wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    if (d->as_bool()) chat.push_back({"parallel_tool_calls", false});
  }
  return {};
}

// model, max_tokens, stop_sequences, temperature, top_p, top_k, stream, metadata, cache_salt.
Status convert_scalars(const Value& body, MessagesRequest& out, json::Object& chat) {
  if (const Value* model = present(body, "model")) {
    if (!model->is_string()) return wrong_type("model", "a string", *model);
    out.model = model->as_string();
  }
  const Value* max_tokens = present(body, "max_tokens");
  if (max_tokens == nullptr) return missing("max_tokens");
  if (!is_integer(*max_tokens)) return wrong_type("max_tokens", "an integer", *max_tokens);
  if (max_tokens->as_number().value < 0) return invalid("max_tokens", "must not be negative");
  if (max_tokens->as_number().value == 0) {
    return unsupported("max_tokens", "0 (warming the cache without a reply) is not supported");
  }
  out.max_tokens = static_cast<std::size_t>(max_tokens->as_number().value);
  chat.push_back({"max_tokens", *max_tokens});
  if (const Value* stop = present(body, "stop_sequences")) {
    if (!stop->is_array()) return wrong_type("stop_sequences", "an array of strings", *stop);
    for (std::size_t i = 0; i < stop->as_array().size(); ++i) {
      const Value& s = stop->as_array()[i];
      if (!s.is_string()) return wrong_type(index_path("stop_sequences", i), "a string", s);
      out.stop_sequences.push_back(s.as_string());
    }
    chat.push_back({"stop", *stop});
  }
  for (const auto& [key, lo, hi, integer] :
       {std::tuple{"temperature", 0.0, 1.0, false}, std::tuple{"top_p", 0.0, 1.0, false},
        std::tuple{"top_k", 0.0, 1e9, true}}) {
    if (Status s = copy_number_in_range(body, key, lo, hi, integer, chat); !s) return s;
  }
  auto stream = copy_stream_flag(body, chat);
  if (!stream) return stream.error();
  out.stream = *stream;
  if (const Value* metadata = present(body, "metadata")) {
    if (!metadata->is_object()) return wrong_type("metadata", "an object", *metadata);
    if (const Value* user = present(*metadata, "user_id")) {
      if (!user->is_string()) return wrong_type("metadata.user_id", "a string", *user);
      out.user_id = user->as_string();
      if (!out.user_id.empty()) chat.push_back({"user", out.user_id});
    }
  }
  if (const Value* ignore_eos = present(body, "ignore_eos")) {  // an engine extension
    if (!ignore_eos->is_bool()) return wrong_type("ignore_eos", "a boolean", *ignore_eos);
    chat.push_back({"ignore_eos", *ignore_eos});
  }
  if (const Value* salt = present(body, "cache_salt")) {
    if (!salt->is_string()) return wrong_type("cache_salt", "a string", *salt);
    chat.push_back({"cache_salt", *salt});
  }
  return {};
}

}  // namespace

Result<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits) {
  return internal::parse_body_with(body, limits, nullptr, [&](json::Value doc) {
    return parse_messages_request_value(std::move(doc), limits);
  });
}

Result<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits,
                                               std::vector<json::SourceMember>& source) {
  return internal::parse_body_with(body, limits, &source, [&](json::Value doc) {
    return parse_messages_request_value(std::move(doc), limits);
  });
}

Result<MessagesRequest> parse_messages_request_value(json::Value body,
                                                     const RequestLimits& limits) {
  if (!body.is_object()) return wrong_type("(body)", "a JSON object", body);
  MessagesRequest out;
  out.chat.api = Api::kMessages;
  out.chat.tool_schema_key = "input_schema";
  ConversionBuilder b(out.chat);
  json::Object options;
  // Anthropic's prompt order: tools, system, messages (the order of the breakpoints).
  if (Status s = convert_tools(body, b); !s) return s.error();
  if (Status s = convert_system(body, b); !s) return s.error();
  if (Status s = convert_messages(body, limits, b); !s) return s.error();
  if (Status s = convert_tool_choice(body, options); !s) return s.error();
  if (Status s = convert_scalars(body, out, options); !s) return s.error();
  if (const Value* cc = present(body, "cache_control")) {
    if (!cc->is_object()) return wrong_type("cache_control", "an object", *cc);
    b.mark_last_message("cache_control");
  }
  json::Object chat;
  if (!out.model.empty()) chat.push_back({"model", out.model});
  b.finish(chat, std::move(options));
  out.chat.body = Value(std::move(chat));
  out.body = std::move(body);
  return out;
}

}  // namespace prefixgate::canon
