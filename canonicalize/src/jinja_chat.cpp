// Loading a model's chat templates from its files, and rendering a chat request through them
// into a RenderedPrompt with provenance segments.
#include <algorithm>

#include "prefixgate/canonicalize/chat_template.h"

namespace prefixgate::canon {
namespace {

constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

Result<jinja::Template> compile_named(std::string_view source, const std::string& param) {
  auto t = jinja::Template::compile(source);
  if (!t) {
    Error e = t.error();
    e.param = param;
    return e;
  }
  return t;
}

// "messages[12].content[0]" -> 12; -1 for other paths.
int message_index_of(std::string_view source) {
  if (!source.starts_with("messages[")) return -1;
  int n = 0;
  for (std::size_t i = 9; i < source.size() && source[i] != ']'; ++i) {
    if (source[i] < '0' || source[i] > '9') return -1;
    n = n * 10 + (source[i] - '0');
  }
  return n;
}

}  // namespace

const jinja::Template* ModelChatTemplates::select(bool has_tools) const {
  if (has_tools && tool_use_template) return &*tool_use_template;
  return default_template ? &*default_template : nullptr;
}

bool ModelChatTemplates::uses_strftime_now() const {
  return (default_template && default_template->uses_strftime_now()) ||
         (tool_use_template && tool_use_template->uses_strftime_now());
}

Result<ModelChatTemplates> load_chat_templates(
    std::string_view tokenizer_config_json, std::optional<std::string_view> chat_template_jinja) {
  auto config = json::parse(tokenizer_config_json);
  if (!config) return config.error();
  if (!config->is_object()) {
    return make_error(ErrorCode::kWrongType, "tokenizer_config.json must be a JSON object");
  }
  ModelChatTemplates out;
  for (const char* key : kSpecialTokens) {
    const json::Value* v = config->find(key);
    if (v == nullptr) continue;
    // A token is a string or an AddedToken object {"content": ..., "lstrip": ...}.
    const json::Value* text = v->is_object() ? v->find("content") : v;
    if (text != nullptr && text->is_string() && !text->as_string().empty()) {
      out.special_tokens.emplace_back(key, text->as_string());
    }
  }
  if (chat_template_jinja) {
    // As in transformers, chat_template.jinja replaces the config's chat_template.
    auto t = compile_named(*chat_template_jinja, "chat_template.jinja");
    if (!t) return t.error();
    out.default_template = std::move(*t);
    return out;
  }
  const json::Value* tmpl = config->find("chat_template");
  if (tmpl == nullptr || tmpl->is_null()) {
    return make_error(ErrorCode::kNotFound, "the model has no chat template", "chat_template");
  }
  if (tmpl->is_string()) {
    auto t = compile_named(tmpl->as_string(), "chat_template");
    if (!t) return t.error();
    out.default_template = std::move(*t);
    return out;
  }
  if (!tmpl->is_array()) {
    return make_error(ErrorCode::kWrongType,
                      "chat_template must be a string or a list of {name, template}",
                      "chat_template");
  }
  for (std::size_t i = 0; i < tmpl->as_array().size(); ++i) {
    const json::Value& entry = tmpl->as_array()[i];
    const std::string param = "chat_template[" + std::to_string(i) + "]";
    const json::Value* name = entry.find("name");
    const json::Value* source = entry.find("template");
    if (name == nullptr || source == nullptr || !name->is_string() || !source->is_string()) {
      return make_error(ErrorCode::kWrongType,
                        "a named chat template needs string name and template", param);
    }
    if (name->as_string() != "default" && name->as_string() != "tool_use") continue;
    auto t = compile_named(source->as_string(), param);
    if (!t) return t.error();
    (name->as_string() == "default" ? out.default_template : out.tool_use_template) = std::move(*t);
  }
  if (!out.default_template) {
    return make_error(ErrorCode::kNotFound, "the model's chat templates have no 'default'",
                      "chat_template");
  }
  return out;
}

Result<RenderedPrompt> render_prompt(const ParsedRequest& request,
                                     const ModelChatTemplates& templates,
                                     const ChatRenderOptions& options) {
  if (request.endpoint == Endpoint::kCompletions) {
    return render_prompt(request, ChatTemplate::kPlain);
  }
  const json::Value* tools = request.body.find("tools");
  const jinja::Template* tmpl = templates.select(tools != nullptr && tools->is_array());
  if (tmpl == nullptr) {
    return make_error(ErrorCode::kNotFound, "the model has no chat template", "chat_template");
  }
  const bool openai = options.content_format == ContentFormat::kOpenAi ||
                      (options.content_format == ContentFormat::kAuto && tmpl->iterates_content());
  const jinja::Context ctx = chat_template_context(request, templates, openai);
  jinja::RenderOptions render_options;
  render_options.now = options.now;
  render_options.limits = options.limits;
  auto out = tmpl->render(ctx, render_options);
  if (!out) return out.error();

  RenderedPrompt prompt;
  prompt.text = std::move(out->text);
  const auto& sources = ctx.sources();
  std::size_t pos = 0;
  const auto add = [&](std::size_t begin, std::size_t end, std::string source, int index) {
    if (end <= begin) return;
    Segment& last = prompt.segments.emplace_back();
    last = Segment{begin, end, std::move(source), index};
  };
  for (const jinja::ProvenanceSpan& s : out->spans) {
    add(pos, s.begin, "template", -1);
    const std::string& source = sources[s.source];
    add(s.begin, s.end, source, message_index_of(source));
    pos = s.end;
  }
  add(pos, prompt.text.size(), "template", -1);

  // The volatile tail starts where the last user message's content is first rendered.
  int last_user = -1;
  for (const Message& m : request.messages) {
    if (m.role == Role::kUser) last_user = static_cast<int>(m.index);
  }
  prompt.volatile_tail_begin = prompt.text.size();
  for (const Segment& s : prompt.segments) {
    if (last_user >= 0 && s.message_index == last_user) {
      prompt.volatile_tail_begin = s.begin;
      break;
    }
  }
  return prompt;
}

}  // namespace prefixgate::canon
