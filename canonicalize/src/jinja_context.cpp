// A chat request as the template context vLLM renders (vllm/entrypoints/chat_utils.py:
// _parse_chat_message_content and _postprocess_messages; tools from serving_chat's
// `tool.model_dump()`). Every string and object that comes from the request is tagged with its
// JSON path, so the rendered prompt can say which bytes came from which field.
#include <string>

#include "jinja_value.h"
#include "prefixgate/canonicalize/chat_template.h"

namespace prefixgate::canon {
namespace {

using jinja::Value;

std::string message_path(std::size_t i) {
  return "messages[" + std::to_string(i) + "]";
}

// The value of `m`'s content in the "string" format: text parts joined with "\n", each part
// tagged with its own path ("messages[1].content" for string content, ".content[0]" for parts).
Value string_content(const Message& m, jinja::Context& ctx) {
  const std::string path = message_path(m.index) + ".content";
  if (m.content_is_string) {
    return Value(m.parts[0].text, ctx.add_source(path));
  }
  jinja::StrBuilder b;
  bool first = true;
  for (std::size_t j = 0; j < m.parts.size(); ++j) {
    const ContentPart& part = m.parts[j];
    if (!part.is_text()) continue;
    if (!first) b.append("\n");
    first = false;
    b.append_tagged(part.text, ctx.add_source(path + "[" + std::to_string(j) + "]"), 0);
  }
  return std::move(b).build();
}

Value openai_content(const Message& m, jinja::Context& ctx) {
  const std::string path = message_path(m.index) + ".content";
  std::vector<Value> parts;
  for (std::size_t j = 0; j < m.parts.size(); ++j) {
    const ContentPart& part = m.parts[j];
    if (!part.is_text()) continue;
    const std::string part_path = m.content_is_string ? path : path + "[" + std::to_string(j) + "]";
    parts.push_back(Value::dict(
        {{"type", Value("text")}, {"text", Value(part.text, ctx.add_source(part_path))}}));
  }
  return Value::list(std::move(parts));
}

// A JSON value as a template value whose top-level container carries `source`.
Value tagged_json(const json::Value& v, jinja::SourceId source) {
  Value out = Value::from_json(v);
  if (out.is_dict()) out.mutable_dict().source = source;
  return out;
}

// One assistant tool call: function.arguments, a JSON string in the API, becomes the value it
// encodes ({} when it is not valid JSON, or neither a string nor an object/array).
Value tool_call(const json::Value& call, const std::string& path, jinja::Context& ctx) {
  if (!call.is_object()) return Value::from_json(call);
  auto data = std::make_shared<jinja::DictData>();
  data->source = ctx.add_source(path);
  for (const json::Member& member : call.as_object()) {
    if (member.key != "function" || !member.value.is_object()) {
      data->items.emplace_back(Value(member.key), Value::from_json(member.value));
      continue;
    }
    auto fn = std::make_shared<jinja::DictData>();
    fn->source = ctx.add_source(path + ".function");
    for (const json::Member& f : member.value.as_object()) {
      if (f.key != "arguments") {
        fn->items.emplace_back(Value(f.key), Value::from_json(f.value));
        continue;
      }
      const jinja::SourceId args_source = ctx.add_source(path + ".function.arguments");
      Value arguments = Value::dict({});
      if (f.value.is_string()) {
        auto parsed = json::parse(f.value.as_string());
        if (parsed.ok()) arguments = tagged_json(*parsed, args_source);
      } else if (f.value.is_object() || f.value.is_array()) {
        arguments = tagged_json(f.value, args_source);
      }
      fn->items.emplace_back(Value("arguments"), std::move(arguments));
    }
    data->items.emplace_back(Value("function"), Value(std::move(fn)));
  }
  return Value(std::move(data));
}

Value message_value(const ParsedRequest& request, const Message& m, bool openai,
                    jinja::Context& ctx) {
  const std::string path = message_path(m.index);
  auto data = std::make_shared<jinja::DictData>();
  data->source = ctx.add_source(path);
  data->items.emplace_back(Value("role"), Value(role_name(m.role)));
  data->items.emplace_back(Value("content"),
                           openai ? openai_content(m, ctx) : string_content(m, ctx));
  const json::Value* raw = nullptr;
  if (const json::Value* list = request.body.find("messages");
      list != nullptr && list->is_array() && m.index < list->as_array().size()) {
    raw = &list->as_array()[m.index];
  }
  if (m.role == Role::kAssistant && m.tool_calls.is_array() && !m.tool_calls.as_array().empty()) {
    std::vector<Value> calls;
    const json::Array& list = m.tool_calls.as_array();
    for (std::size_t j = 0; j < list.size(); ++j) {
      calls.push_back(tool_call(list[j], path + ".tool_calls[" + std::to_string(j) + "]", ctx));
    }
    data->items.emplace_back(Value("tool_calls"), Value::list(std::move(calls)));
  }
  if (m.role == Role::kAssistant && raw != nullptr) {
    if (const json::Value* r = raw->find("reasoning"); r != nullptr && r->is_string()) {
      const jinja::SourceId source = ctx.add_source(path + ".reasoning");
      data->items.emplace_back(Value("reasoning"), Value(r->as_string(), source));
      data->items.emplace_back(Value("reasoning_content"), Value(r->as_string(), source));
    }
  }
  if (m.role == Role::kTool && m.tool_call_id) {
    data->items.emplace_back(Value("tool_call_id"),
                             Value(*m.tool_call_id, ctx.add_source(path + ".tool_call_id")));
  }
  if (m.name) data->items.emplace_back(Value("name"), Value(*m.name));
  return Value(std::move(data));
}

// pydantic's model_dump() of vLLM's tool model: declared fields first, in declaration order
// and filled with null, then the fields it does not declare, in the client's order.
Value tool_value(const json::Value& tool, std::size_t i, jinja::Context& ctx) {
  const std::string path = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object()) return Value::from_json(tool);
  auto data = std::make_shared<jinja::DictData>();
  data->source = ctx.add_source(path);
  const json::Value* type = tool.find("type");
  data->items.emplace_back(Value("type"),
                           type != nullptr ? Value::from_json(*type) : Value("function"));
  const json::Value* fn = tool.find("function");
  if (fn != nullptr && fn->is_object()) {
    auto f = std::make_shared<jinja::DictData>();
    f->source = ctx.add_source(path + ".function");
    for (const char* key : {"name", "description", "parameters"}) {
      const json::Value* v = fn->find(key);
      f->items.emplace_back(Value(key), v != nullptr ? Value::from_json(*v) : Value(jinja::None{}));
    }
    for (const json::Member& m : fn->as_object()) {
      if (m.key == "name" || m.key == "description" || m.key == "parameters") continue;
      f->items.emplace_back(Value(m.key), Value::from_json(m.value));
    }
    data->items.emplace_back(Value("function"), Value(std::move(f)));
  }
  for (const json::Member& m : tool.as_object()) {
    if (m.key == "type" || m.key == "function") continue;
    data->items.emplace_back(Value(m.key), Value::from_json(m.value));
  }
  return Value(std::move(data));
}

}  // namespace

jinja::Context chat_template_context(const ParsedRequest& request,
                                     const ModelChatTemplates& templates, bool openai_content) {
  jinja::Context ctx;
  std::vector<Value> messages;
  messages.reserve(request.messages.size());
  for (const Message& m : request.messages) {
    messages.push_back(message_value(request, m, openai_content, ctx));
  }
  ctx.set("messages", Value::list(std::move(messages)));
  const json::Value* tools = request.body.find("tools");
  if (tools != nullptr && tools->is_array()) {
    std::vector<Value> list;
    for (std::size_t i = 0; i < tools->as_array().size(); ++i) {
      list.push_back(tool_value(tools->as_array()[i], i, ctx));
    }
    ctx.set("tools", Value::list(std::move(list)));
  } else {
    ctx.set("tools", Value(jinja::None{}));
  }
  ctx.set("documents", Value(jinja::None{}));
  const json::Value* agp = request.body.find("add_generation_prompt");
  ctx.set("add_generation_prompt", Value(agp != nullptr && agp->is_bool() ? agp->as_bool() : true));
  for (const auto& [name, text] : templates.special_tokens) ctx.set(name, Value(text));
  if (const json::Value* kwargs = request.body.find("chat_template_kwargs");
      kwargs != nullptr && kwargs->is_object()) {
    for (const json::Member& m : kwargs->as_object()) ctx.set(m.key, Value::from_json(m.value));
  }
  return ctx;
}

}  // namespace prefixgate::canon
