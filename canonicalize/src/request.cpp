// Validation of OpenAI request bodies into ParsedRequest. Field rules follow the OpenAI API
// reference for chat completions and (legacy) completions; unknown fields pass through.
#include "prefixgate/canonicalize/request.h"

#include <algorithm>
#include <array>
#include <limits>

#include "body_parse.h"
#include "field_checks.h"
#include "message_memo.h"

namespace prefixgate::canon {
namespace {

using json::Type;
using json::Value;

using checks::field_path;
using checks::index_path;
using checks::is_integer;
using checks::missing;
using checks::wrong_type;

// Type checks of the common scalar fields: a client that sends "temperature":"hot" gets a 400
// naming the field instead of an upstream error after it was routed.
Status check_common_fields(const Value& body) {
  struct Rule {
    std::string_view name;
    enum { kBool, kNumber, kInteger, kString, kStop, kObjectOrString, kObject } kind;
  };
  static constexpr Rule kRules[] = {
      {"stream", Rule::kBool},
      {"temperature", Rule::kNumber},
      {"top_p", Rule::kNumber},
      {"presence_penalty", Rule::kNumber},
      {"frequency_penalty", Rule::kNumber},
      {"max_tokens", Rule::kInteger},
      {"max_completion_tokens", Rule::kInteger},
      {"n", Rule::kInteger},
      {"seed", Rule::kInteger},
      {"model", Rule::kString},
      {"user", Rule::kString},
      {"cache_salt", Rule::kString},
      {"stop", Rule::kStop},
      {"tool_choice", Rule::kObjectOrString},
      {"response_format", Rule::kObject},
      {"stream_options", Rule::kObject},
  };
  // One pass over the body's members, each rule's first member kept (as Value::find gives
  // it), then the rules in their order: not a search through the members per rule.
  std::array<const Value*, std::size(kRules)> found{};
  if (body.is_object()) {
    for (const json::Member& m : body.as_object()) {
      for (std::size_t r = 0; r < std::size(kRules); ++r) {
        if (m.key.size() == kRules[r].name.size() && m.key == kRules[r].name) {
          if (found[r] == nullptr) found[r] = &m.value;
          break;
        }
      }
    }
  }
  for (std::size_t r = 0; r < std::size(kRules); ++r) {
    const Rule& rule = kRules[r];
    const Value* v = found[r];
    if (v == nullptr || v->is_null()) continue;
    const auto path = [&rule] { return std::string(rule.name); };  // for an error only
    switch (rule.kind) {
      case Rule::kBool:
        if (!v->is_bool()) return wrong_type(path(), "a boolean", *v);
        break;
      case Rule::kNumber:
        if (!v->is_number()) return wrong_type(path(), "a number", *v);
        break;
      case Rule::kInteger:
        if (!is_integer(*v)) return wrong_type(path(), "an integer", *v);
        if (v->as_number().value < 0) {
          return make_error(ErrorCode::kInvalidValue, "'" + path() + "' must not be negative",
                            path());
        }
        break;
      case Rule::kString:
        if (!v->is_string()) return wrong_type(path(), "a string", *v);
        break;
      case Rule::kStop:
        if (v->is_string()) break;
        if (!v->is_array()) return wrong_type(path(), "a string or an array of strings", *v);
        for (std::size_t i = 0; i < v->as_array().size(); ++i) {
          if (!v->as_array()[i].is_string()) {
            return wrong_type(index_path(rule.name, i), "a string", v->as_array()[i]);
          }
        }
        break;
      case Rule::kObjectOrString:
        if (!v->is_object() && !v->is_string()) {
          return wrong_type(path(), "a string or an object", *v);
        }
        break;
      case Rule::kObject:
        if (!v->is_object()) return wrong_type(path(), "an object", *v);
        break;
    }
  }
  return {};
}

// "messages[index].field", built only for an error message: most requests have none, and a
// long conversation would otherwise build a few strings per message.
std::string message_field(std::size_t index, std::string_view field) {
  return field_path(index_path("messages", index), field);
}

Result<Role> parse_role(const Value& v, std::size_t index) {
  if (!v.is_string()) return wrong_type(message_field(index, "role"), "a string", v);
  const std::string& s = v.as_string();
  if (s == "system") return Role::kSystem;
  if (s == "developer") return Role::kDeveloper;
  if (s == "user") return Role::kUser;
  if (s == "assistant") return Role::kAssistant;
  if (s == "tool") return Role::kTool;
  if (s == "function") return Role::kFunction;
  const std::string path = message_field(index, "role");
  return make_error(ErrorCode::kInvalidValue,
                    "'" + path + "' must be one of system, developer, user, assistant, tool, " +
                        "function; got '" + s + "'",
                    path);
}

Status parse_content(const Value& content, std::size_t index, Message& msg) {
  if (content.is_string()) {
    msg.content_is_string = true;
    // No copy of the whole value: a plain string's text is all there is to render.
    msg.parts.push_back(ContentPart{"text", content.as_string(), {}});
    return {};
  }
  if (content.is_null()) return {};
  if (!content.is_array()) {
    return wrong_type(message_field(index, "content"), "a string or an array of content parts",
                      content);
  }
  const json::Array& parts = content.as_array();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto part_path = [&] { return index_path(message_field(index, "content"), i); };
    const Value& part = parts[i];
    if (!part.is_object()) return wrong_type(part_path(), "an object", part);
    const Value* type = part.find("type");
    if (type == nullptr) return missing(field_path(part_path(), "type"));
    if (!type->is_string()) return wrong_type(field_path(part_path(), "type"), "a string", *type);
    ContentPart out{type->as_string(), {}, part};
    if (out.is_text()) {
      const char* key = out.type == "text" ? "text" : "refusal";
      const Value* text = part.find(key);
      if (text == nullptr) return missing(field_path(part_path(), key));
      if (!text->is_string()) return wrong_type(field_path(part_path(), key), "a string", *text);
      out.text = text->as_string();
    }
    msg.parts.push_back(std::move(out));
  }
  return {};
}

Status parse_message(const Value& v, std::size_t index, Message& msg) {
  if (!v.is_object()) return wrong_type(index_path("messages", index), "an object", v);
  msg.index = index;
  const Value* role = v.find("role");
  if (role == nullptr) return missing(message_field(index, "role"));
  auto parsed_role = parse_role(*role, index);
  if (!parsed_role) return parsed_role.error();
  msg.role = *parsed_role;

  const Value* content = v.find("content");
  const Value* tool_calls = v.find("tool_calls");
  const bool may_omit_content = msg.role == Role::kAssistant;
  if (content == nullptr || content->is_null()) {
    if (!may_omit_content) return missing(message_field(index, "content"));
  } else if (Status s = parse_content(*content, index, msg); !s) {
    return s;
  }
  if (tool_calls != nullptr && !tool_calls->is_null()) {
    if (!tool_calls->is_array()) {
      return wrong_type(message_field(index, "tool_calls"), "an array", *tool_calls);
    }
    // Shared with `v` where the parser shares it: the message memo's copies then copy a
    // reference, not the calls.
    msg.tool_calls = v.share_part(*tool_calls);
  }
  if (const Value* name = v.find("name"); name != nullptr && !name->is_null()) {
    if (!name->is_string()) return wrong_type(message_field(index, "name"), "a string", *name);
    msg.name = name->as_string();
  }
  if (const Value* id = v.find("tool_call_id"); id != nullptr && !id->is_null()) {
    if (!id->is_string()) return wrong_type(message_field(index, "tool_call_id"), "a string", *id);
    msg.tool_call_id = id->as_string();
  }
  if (msg.role == Role::kTool && !msg.tool_call_id) {
    return missing(message_field(index, "tool_call_id"));
  }
  return {};
}

// A function definition: {"name": string, "description"?: string, "parameters"?: object}.
// `fn` at `parent`.`field` (or `field` alone): the path is built only for an error.
Status check_function(const Value& fn, std::string_view parent, std::string_view field,
                      std::string& name_out) {
  const auto path = [&](std::string_view member = {}) {
    const std::string at = field_path(parent, field);
    return member.empty() ? at : field_path(at, member);
  };
  if (!fn.is_object()) return wrong_type(path(), "an object", fn);
  const Value* name = fn.find("name");
  if (name == nullptr) return missing(path("name"));
  if (!name->is_string()) return wrong_type(path("name"), "a string", *name);
  if (name->as_string().empty()) {
    return make_error(ErrorCode::kInvalidValue, "'" + path("name") + "' is empty", path("name"));
  }
  if (const Value* d = fn.find("description"); d != nullptr && !d->is_string()) {
    return wrong_type(path("description"), "a string", *d);
  }
  if (const Value* p = fn.find("parameters"); p != nullptr && !p->is_object()) {
    return wrong_type(path("parameters"), "an object", *p);
  }
  name_out = name->as_string();
  return {};
}

Status parse_tools(const Value& body, ParsedRequest& req) {
  if (const Value* tools = body.find("tools"); tools != nullptr && !tools->is_null()) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    req.tools.reserve(tools->as_array().size());
    for (std::size_t i = 0; i < tools->as_array().size(); ++i) {
      ToolDef def{{}, index_path("tools", i)};
      const std::string& path = def.path;
      const Value& tool = tools->as_array()[i];
      if (!tool.is_object()) return wrong_type(path, "an object", tool);
      const Value* type = tool.find("type");
      if (type == nullptr) return missing(field_path(path, "type"));
      if (!type->is_string()) return wrong_type(field_path(path, "type"), "a string", *type);
      if (type->as_string() == "function") {
        const Value* fn = tool.find("function");
        if (fn == nullptr) return missing(field_path(path, "function"));
        if (Status s = check_function(*fn, path, "function", def.name); !s) return s;
      } else if (const Value* name = tool.find("name"); name != nullptr && name->is_string()) {
        def.name = name->as_string();  // custom tools carry their name at the top level
      }
      req.tools.push_back(std::move(def));
    }
  }
  if (const Value* fns = body.find("functions"); fns != nullptr && !fns->is_null()) {
    if (!fns->is_array()) return wrong_type("functions", "an array", *fns);
    for (std::size_t i = 0; i < fns->as_array().size(); ++i) {
      ToolDef def{{}, index_path("functions", i)};
      if (Status s = check_function(fns->as_array()[i], {}, def.path, def.name); !s) return s;
      req.tools.push_back(std::move(def));
    }
  }
  return {};
}

Result<TokenId> token_id(const Value& v, const std::string& path) {
  if (!is_integer(v) || v.as_number().value < 0 ||
      v.as_number().value > std::numeric_limits<TokenId>::max()) {
    return make_error(ErrorCode::kInvalidValue,
                      "'" + path + "' must be a token id (an integer >= 0)", path);
  }
  return static_cast<TokenId>(v.as_number().value);
}

Status parse_token_prompt(const json::Array& ids, const std::string& path, Prompt& out) {
  out.is_tokens = true;
  out.token_ids.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto id = token_id(ids[i], index_path(path, i));
    if (!id) return id.error();
    out.token_ids.push_back(*id);
  }
  return {};
}

// `prompt`: a string, an array of strings, an array of token ids, or an array of such arrays.
Status parse_prompts(const Value& body, ParsedRequest& req) {
  const Value* prompt = body.find("prompt");
  if (prompt == nullptr || prompt->is_null()) return missing("prompt");
  if (prompt->is_string()) {
    req.prompts.push_back(Prompt{.text = prompt->as_string(), .token_ids = {}, .is_tokens = false});
    return {};
  }
  if (!prompt->is_array()) {
    return wrong_type("prompt", "a string, an array of strings or an array of token ids", *prompt);
  }
  const json::Array& items = prompt->as_array();
  if (items.empty()) return make_error(ErrorCode::kInvalidValue, "'prompt' is empty", "prompt");
  if (items.front().is_number()) {
    Prompt p;
    if (Status s = parse_token_prompt(items, "prompt", p); !s) return s;
    req.prompts.push_back(std::move(p));
    return {};
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string path = index_path("prompt", i);
    Prompt p;
    if (items[i].is_string()) {
      p.text = items[i].as_string();
    } else if (items[i].is_array()) {
      if (Status s = parse_token_prompt(items[i].as_array(), path, p); !s) return s;
    } else {
      return wrong_type(path, "a string or an array of token ids", items[i]);
    }
    req.prompts.push_back(std::move(p));
  }
  return {};
}

}  // namespace

const char* role_name(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kDeveloper: return "developer";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
    case Role::kFunction: return "function";
  }
  return "user";
}

std::string Message::text() const {
  std::string out;
  for (const ContentPart& part : parts) {
    if (part.is_text()) out += part.text;
  }
  return out;
}

const ToolListText* tool_list_text(const ParsedRequest& request, std::string_view key) {
  for (const auto& t : request.tool_texts) {
    if (t->key == key) return t.get();
  }
  return nullptr;
}

std::optional<Endpoint> guess_endpoint(const json::Value& body) {
  if (body.find("messages") != nullptr) return Endpoint::kChatCompletions;
  if (body.find("prompt") != nullptr) return Endpoint::kCompletions;
  return std::nullopt;
}

namespace {

Result<ParsedRequest> parse_request_text(std::string_view body, Endpoint endpoint,
                                         const RequestLimits& limits,
                                         std::vector<json::SourceMember>* source) {
  return internal::parse_body_with(body, limits, source, [&](json::Value doc) {
    return parse_request_value(std::move(doc), endpoint, limits);
  });
}

}  // namespace

namespace internal {

Result<json::Value> parse_body(std::string_view body, const RequestLimits& limits,
                               std::vector<json::SourceMember>* source) {
  if (body.size() > limits.max_body_bytes) {
    return make_error(ErrorCode::kTooLarge, "request body is " + std::to_string(body.size()) +
                                                " bytes; the limit is " +
                                                std::to_string(limits.max_body_bytes));
  }
  const json::ParseLimits parse_limits{.max_bytes = limits.max_body_bytes,
                                       .max_depth = limits.max_depth,
                                       .readable_past_end = limits.readable_past_end};
  if (source == nullptr) return json::parse(body, parse_limits);
  // Tool lists come unchanged turn after turn: their trees are built once per thread. So do a
  // conversation's earlier turns (the Chat Completions and Anthropic Messages `messages`, the
  // Responses `input`), each built once per thread.
  static constexpr std::array<std::string_view, 2> kSharedKeys = {"tools", "functions"};
  static constexpr std::array<std::string_view, 2> kElementKeys = {"messages", "input"};
  thread_local std::vector<json::MemberSpan> spans;  // reused: no allocation a request
  auto doc = json::parse(body, parse_limits, spans,
                         json::MemoKeys{.shared = kSharedKeys, .elements = kElementKeys});
  if (!doc) return doc.error();
  source->clear();
  if (doc->is_object()) {
    const json::Object& members = doc->as_object();
    source->reserve(std::min(members.size(), spans.size()));
    for (std::size_t i = 0; i < members.size() && i < spans.size(); ++i) {
      source->push_back(json::SourceMember{
          members[i].key, body.substr(spans[i].begin, spans[i].end - spans[i].begin)});
    }
  }
  return doc;
}

}  // namespace internal

Result<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                    const RequestLimits& limits) {
  return parse_request_text(body, endpoint, limits, nullptr);
}

Result<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                    const RequestLimits& limits,
                                    std::vector<json::SourceMember>& source) {
  return parse_request_text(body, endpoint, limits, &source);
}

Result<ParsedRequest> parse_request_value(json::Value body, Endpoint endpoint,
                                          const RequestLimits& limits) {
  if (!body.is_object()) return wrong_type("(body)", "a JSON object", body);
  if (Status s = check_common_fields(body); !s) return s.error();

  ParsedRequest req;
  req.endpoint = endpoint;
  if (const Value* model = body.find("model"); model != nullptr && model->is_string()) {
    req.model = model->as_string();
  }
  if (const Value* stream = body.find("stream"); stream != nullptr && stream->is_bool()) {
    req.stream = stream->as_bool();
  }
  if (const Value* salt = body.find("cache_salt"); salt != nullptr && salt->is_string()) {
    req.cache_salt = salt->as_string();
  }

  if (endpoint == Endpoint::kChatCompletions) {
    const Value* messages = body.find("messages");
    if (messages == nullptr) return missing("messages");
    if (!messages->is_array()) return wrong_type("messages", "an array", *messages);
    const json::Array& list = messages->as_array();
    if (list.empty()) {
      return make_error(ErrorCode::kInvalidValue, "'messages' must not be empty", "messages");
    }
    if (list.size() > limits.max_messages) {
      return make_error(ErrorCode::kTooLarge,
                        "'messages' has " + std::to_string(list.size()) +
                            " entries; the limit is " + std::to_string(limits.max_messages),
                        "messages");
    }
    req.messages.resize(list.size());
    // An earlier turn that the parser handed back as the tree it built before was parsed into
    // its message before too (message_memo.h).
    internal::MessageMemo& memo = internal::MessageMemo::for_this_thread();
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (const Message* kept = memo.find(list[i])) {
        req.messages[i] = *kept;
        req.messages[i].index = i;
        continue;
      }
      if (Status s = parse_message(list[i], i, req.messages[i]); !s) return s.error();
      memo.keep(list[i], req.messages[i]);
    }
    if (Status s = parse_tools(body, req); !s) return s.error();
  } else {
    if (Status s = parse_prompts(body, req); !s) return s.error();
  }
  req.body = std::move(body);
  return req;
}

}  // namespace prefixgate::canon
