// Validation of OpenAI Responses bodies (the stateless subset) and their conversion into Chat
// Completions requests. Field rules follow OpenAI's API reference; the mapping is in
// responses_api.h.
#include <set>
#include <tuple>

#include "body_parse.h"
#include "conversion_builder.h"
#include "field_checks.h"
#include "prefixgate/canonicalize/responses_api.h"

namespace prefixgate::canon {
namespace {

using json::Value;
using namespace checks;

Result<const std::string*> string_field(const Value& object, const std::string& path,
                                        std::string_view key) {
  const Value* v = present(object, key);
  if (v == nullptr) return missing(field_path(path, key));
  if (!v->is_string()) return wrong_type(field_path(path, key), "a string", *v);
  return &v->as_string();
}

// One content part of an input message or a function_call_output.
Result<ContentBlock> content_part(const Value& part, const std::string& path, JsonPath at,
                                  bool images_allowed) {
  if (!part.is_object()) return wrong_type(path, "an object", part);
  auto type = string_field(part, path, "type");
  if (!type) return type.error();
  ContentBlock cb{.path = std::move(at), .source = path};
  if (**type == "input_text" || **type == "output_text") {
    auto text = string_field(part, path, "text");
    if (!text) return text.error();
    cb.text = **text;
    cb.is_text = true;
  } else if (**type == "refusal") {
    auto refusal = string_field(part, path, "refusal");
    if (!refusal) return refusal.error();
    cb.part = json::Object{{"type", "refusal"}, {"refusal", **refusal}};
  } else if (**type == "input_image" && images_allowed) {
    const Value* url = present(part, "image_url");
    if (url == nullptr) {
      return unsupported(path, "an image must be given by image_url (file_id is not supported)");
    }
    if (!url->is_string()) return wrong_type(field_path(path, "image_url"), "a string", *url);
    json::Object image{{"url", *url}};
    if (const Value* detail = present(part, "detail"); detail != nullptr && detail->is_string()) {
      image.push_back({"detail", *detail});
    }
    cb.part = json::Object{{"type", "image_url"}, {"image_url", Value(std::move(image))}};
  } else {
    return unsupported(field_path(path, "type"), "'" + **type + "' is not supported here");
  }
  return cb;
}

// A string, or an array of content parts.
Status content_of(const Value& v, const std::string& path, const JsonPath& at, bool images_allowed,
                  std::vector<ContentBlock>& out) {
  if (v.is_string()) {
    out.push_back(ContentBlock{
        .path = at, .source = path, .text = v.as_string(), .is_text = true, .whole = true});
    return {};
  }
  if (!v.is_array()) return wrong_type(path, "a string or an array of content parts", v);
  for (std::size_t i = 0; i < v.as_array().size(); ++i) {
    auto part =
        content_part(v.as_array()[i], index_path(path, i), with_index(at, i), images_allowed);
    if (!part) return part.error();
    out.push_back(std::move(*part));
  }
  return {};
}

Status convert_message_item(const Value& item, const std::string& path, const JsonPath& at,
                            ConversionBuilder& b) {
  auto role = string_field(item, path, "role");
  if (!role) return role.error();
  if (**role != "user" && **role != "assistant" && **role != "system" && **role != "developer") {
    return invalid(field_path(path, "role"),
                   "must be user, assistant, system or developer, got '" + **role + "'");
  }
  const Value* content = present(item, "content");
  if (content == nullptr) return missing(field_path(path, "content"));
  std::vector<ContentBlock> blocks;
  if (Status s =
          content_of(*content, field_path(path, "content"), with_key(at, "content"), true, blocks);
      !s) {
    return s;
  }
  b.add_content_message(**role, blocks, at);
  return {};
}

Status convert_function_call(const Value& item, const std::string& path, const JsonPath& at,
                             ConversionBuilder& b) {
  auto call_id = string_field(item, path, "call_id");
  if (!call_id) return call_id.error();
  auto name = string_field(item, path, "name");
  if (!name) return name.error();
  auto arguments = string_field(item, path, "arguments");
  if (!arguments) return arguments.error();
  Value call(
      json::Object{{"id", **call_id},
                   {"type", "function"},
                   {"function", json::Object{{"name", **name}, {"arguments", **arguments}}}});
  b.add_tool_call(ToolCallBlock{std::move(call), at, path, false}, at);
  return {};
}

Status convert_function_output(const Value& item, const std::string& path, const JsonPath& at,
                               ConversionBuilder& b) {
  auto call_id = string_field(item, path, "call_id");
  if (!call_id) return call_id.error();
  const Value* output = present(item, "output");
  if (output == nullptr) return missing(field_path(path, "output"));
  std::vector<ContentBlock> blocks;
  if (Status s =
          content_of(*output, field_path(path, "output"), with_key(at, "output"), false, blocks);
      !s) {
    return s;
  }
  b.add_tool_result(**call_id, blocks, at, path, false);
  return {};
}

Status convert_input(const Value& body, const RequestLimits& limits, ConversionBuilder& b) {
  const Value* input = present(body, "input");
  if (input == nullptr) return missing("input");
  if (input->is_string()) {
    b.add_content_message("user",
                          {ContentBlock{.path = {key_step("input")},
                                        .source = "input",
                                        .text = input->as_string(),
                                        .is_text = true,
                                        .whole = true}},
                          {key_step("input")});
    return {};
  }
  if (!input->is_array()) return wrong_type("input", "a string or an array of items", *input);
  if (input->as_array().empty()) return invalid("input", "must not be empty");
  if (input->as_array().size() > limits.max_messages) {
    return make_error(ErrorCode::kTooLarge,
                      "'input' has " + std::to_string(input->as_array().size()) +
                          " items; the limit is " + std::to_string(limits.max_messages),
                      "input");
  }
  // An earlier item that the parser handed back as the tree it built before converted into its
  // chat messages before too (conversion_builder.h), unless it was a function call.
  for (std::size_t i = 0; i < input->as_array().size(); ++i) {
    const Value& item = input->as_array()[i];
    if (b.add_kept(item, i)) continue;
    const ConversionBuilder::Mark from = b.mark();
    const std::string path = index_path("input", i);
    const JsonPath at{key_step("input"), index_step(i)};
    if (!item.is_object()) return wrong_type(path, "an object", item);
    std::string type = "message";
    if (const Value* t = present(item, "type")) {
      if (!t->is_string()) return wrong_type(field_path(path, "type"), "a string", *t);
      type = t->as_string();
    }
    Status s;
    if (type == "message") {
      s = convert_message_item(item, path, at, b);
    } else if (type == "function_call") {
      s = convert_function_call(item, path, at, b);
    } else if (type == "function_call_output") {
      s = convert_function_output(item, path, at, b);
    } else if (type == "reasoning") {
      continue;  // a model's reasoning: not part of any chat template's prompt
    } else if (type == "item_reference") {
      return unsupported(field_path(path, "type"),
                         "'item_reference' is not supported: no items are stored; send the item "
                         "itself");
    } else {
      return unsupported(field_path(path, "type"), "'" + type + "' items are not supported");
    }
    if (!s) return s;
    if (type != "function_call") b.keep_converted(item, from, i);
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
    auto type = string_field(tool, path, "type");
    if (!type) return type.error();
    if (**type != "function") {
      return unsupported(field_path(path, "type"),
                         "'" + **type + "' tools are not supported; only function tools are");
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
    const Value* parameters = present(tool, "parameters");
    if (parameters != nullptr && !parameters->is_object()) {
      return wrong_type(field_path(path, "parameters"), "an object", *parameters);
    }
    const Value* strict = present(tool, "strict");
    if (strict != nullptr && !strict->is_bool()) {
      return wrong_type(field_path(path, "strict"), "a boolean", *strict);
    }
    b.add_tool(*tools, **name, description, parameters, strict, path, false);
  }
  return {};
}

Status convert_tool_choice(const Value& body, json::Object& chat) {
  const Value* choice = present(body, "tool_choice");
  if (choice == nullptr) return {};
  if (choice->is_string()) {
    const std::string& c = choice->as_string();
    if (c != "auto" && c != "none" && c != "required") {
      return invalid("tool_choice", "must be auto, none or required, got '" + c + "'");
    }
    chat.push_back({"tool_choice", c});
    return {};
  }
  if (!choice->is_object()) return wrong_type("tool_choice", "a string or an object", *choice);
  auto type = string_field(*choice, "tool_choice", "type");
  if (!type) return type.error();
  if (**type != "function") {
    return unsupported("tool_choice.type", "'" + **type + "' is not supported (function)");
  }
  auto name = string_field(*choice, "tool_choice", "name");
  if (!name) return name.error();
  chat.push_back({"tool_choice", json::Object{{"type", "function"},
                                              {"function", json::Object{{"name", **name}}}}});
  return {};
}

// Fields that need state this server does not keep.
Status refuse_stateful(const Value& body) {
  if (present(body, "previous_response_id") != nullptr) {
    return unsupported("previous_response_id",
                       "is not supported: responses are not stored; send the whole conversation "
                       "in 'input'");
  }
  if (present(body, "conversation") != nullptr) {
    return unsupported("conversation",
                       "is not supported: conversations are not stored; send the whole "
                       "conversation in 'input'");
  }
  if (present(body, "prompt") != nullptr) {
    return unsupported("prompt", "(a stored prompt template) is not supported");
  }
  for (const char* key : {"store", "background"}) {
    const Value* v = present(body, key);
    if (v == nullptr) continue;
    if (!v->is_bool()) return wrong_type(key, "a boolean", *v);
    if (v->as_bool()) {
      return unsupported(key, std::string("true is not supported: responses are not stored; set ") +
                                  key + " to false");
    }
  }
  return {};
}

Status convert_scalars(const Value& body, ResponsesRequest& out, json::Object& chat) {
  if (const Value* model = present(body, "model")) {
    if (!model->is_string()) return wrong_type("model", "a string", *model);
    out.model = model->as_string();
  }
  if (const Value* p = present(body, "parallel_tool_calls")) {
    if (!p->is_bool()) return wrong_type("parallel_tool_calls", "a boolean", *p);
    chat.push_back({"parallel_tool_calls", *p});
  }
  if (const Value* max = present(body, "max_output_tokens")) {
    if (!is_integer(*max)) return wrong_type("max_output_tokens", "an integer", *max);
    if (max->as_number().value < 1) return invalid("max_output_tokens", "must be at least 1");
    out.max_output_tokens = static_cast<std::size_t>(max->as_number().value);
    chat.push_back({"max_tokens", *max});
  }
  for (const auto& [key, lo, hi] :
       {std::tuple{"temperature", 0.0, 2.0}, std::tuple{"top_p", 0.0, 1.0}}) {
    if (Status s = copy_number_in_range(body, key, lo, hi, false, chat); !s) return s;
  }
  auto stream = copy_stream_flag(body, chat);
  if (!stream) return stream.error();
  out.stream = *stream;
  if (const Value* text = present(body, "text")) {
    if (!text->is_object()) return wrong_type("text", "an object", *text);
    if (const Value* format = present(*text, "format")) {
      const Value* type = format->is_object() ? present(*format, "type") : nullptr;
      if (type == nullptr || !type->is_string() || type->as_string() != "text") {
        return unsupported("text.format", "is not supported: only {\"type\": \"text\"} is");
      }
    }
  }
  std::string user;
  for (const char* key : {"prompt_cache_key", "user"}) {
    const Value* v = present(body, key);
    if (v == nullptr) continue;
    if (!v->is_string()) return wrong_type(key, "a string", *v);
    if (!v->as_string().empty()) user = v->as_string();  // `user` wins over prompt_cache_key
  }
  if (!user.empty()) chat.push_back({"user", user});
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

Result<ResponsesRequest> parse_responses_request(std::string_view body,
                                                 const RequestLimits& limits) {
  return internal::parse_body_with(body, limits, nullptr, [&](json::Value doc) {
    return parse_responses_request_value(std::move(doc), limits);
  });
}

Result<ResponsesRequest> parse_responses_request(std::string_view body, const RequestLimits& limits,
                                                 std::vector<json::SourceMember>& source) {
  return internal::parse_body_with(body, limits, &source, [&](json::Value doc) {
    return parse_responses_request_value(std::move(doc), limits);
  });
}

Result<ResponsesRequest> parse_responses_request_value(json::Value body,
                                                       const RequestLimits& limits) {
  if (!body.is_object()) return wrong_type("(body)", "a JSON object", body);
  if (Status s = refuse_stateful(body); !s) return s.error();
  ResponsesRequest out;
  out.chat.api = Api::kResponses;
  out.chat.tool_schema_key = "parameters";
  ConversionBuilder b(out.chat);
  if (const Value* instructions = present(body, "instructions")) {
    if (!instructions->is_string()) {
      return wrong_type("instructions", "a string", *instructions);
    }
    b.add_content_message("system",
                          {ContentBlock{.path = {key_step("instructions")},
                                        .source = "instructions",
                                        .text = instructions->as_string(),
                                        .is_text = true,
                                        .whole = true}},
                          {key_step("instructions")});
  }
  json::Object options;
  if (Status s = convert_input(body, limits, b); !s) return s.error();
  if (Status s = convert_tools(body, b); !s) return s.error();
  if (Status s = convert_tool_choice(body, options); !s) return s.error();
  if (Status s = convert_scalars(body, out, options); !s) return s.error();
  json::Object chat;
  if (!out.model.empty()) chat.push_back({"model", out.model});
  b.finish(chat, std::move(options));
  out.chat.body = Value(std::move(chat));
  out.body = std::move(body);
  return out;
}

}  // namespace prefixgate::canon
