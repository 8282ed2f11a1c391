// A model's own chat template (Jinja2), loaded from its files' contents and rendered the way a
// vLLM engine renders a chat request: the same context, the same template, the same bytes.
//
// render.h's built-in templates (ChatTemplate) approximate model families; this renders the
// template the model actually ships, so a router's prompt matches the engine's byte for byte
// and therefore its cached prefixes.
//
//   auto model = canon::load_chat_templates(tokenizer_config_json_text, chat_template_jinja_text);
//   if (!model) return model.error();
//   auto prompt = canon::render_prompt(request, *model, {.now = today});
//   if (!prompt) return reply(http_status(prompt.error()), ...);   // e.g. roles must
//   use(prompt->text, prompt->segments);                                  // alternate (400)
//
// canonicalize/ does no I/O: callers read tokenizer_config.json and chat_template.jinja.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/jinja.h"
#include "prefixgate/canonicalize/render.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon {

struct ModelChatTemplates {
  // The template for requests without tools (transformers' "default"), and the one a model
  // names "tool_use" for requests with tools, if it has one.
  std::optional<jinja::Template> default_template;
  std::optional<jinja::Template> tool_use_template;
  // bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: those the
  // config sets, as text (an AddedToken's "content").
  std::vector<std::pair<std::string, std::string>> special_tokens;

  // The template a request renders with: tool_use when it has tools and one exists.
  const jinja::Template* select(bool has_tools) const;
  // Whether either template puts strftime_now() into the prompt (a daily-changing prefix).
  bool uses_strftime_now() const;
};

// Reads a model's chat templates from the text of its tokenizer_config.json and, when the model
// ships one, of its chat_template.jinja, which replaces the config's `chat_template` as it does
// in transformers. `chat_template` may be a string or a list of {"name", "template"}.
// Errors: kInvalidJson, kWrongType, kNotFound (no chat template at all), and the template's
// own syntax (kInvalidValue) or kUnsupported errors; Error::param names the template.
Result<ModelChatTemplates> load_chat_templates(
    std::string_view tokenizer_config_json,
    std::optional<std::string_view> chat_template_jinja = std::nullopt);

// How message content reaches the template (vLLM's --chat-template-content-format).
enum class ContentFormat {
  kAuto,    // kOpenAi when the template loops over message content, else kString (vLLM's default)
  kString,  // content is a string: text parts joined with "\n"
  kOpenAi,  // content is a list of {"type": "text", "text": ...}
};

struct ChatRenderOptions {
  std::optional<jinja::CivilTime> now;  // for templates that call strftime_now()
  ContentFormat content_format = ContentFormat::kAuto;
  jinja::RenderLimits limits;
};

// The template context vLLM builds for a chat request (vllm/entrypoints/chat_utils.py):
//   messages - role, content (per `content_format`; null content is "" or []), assistant
//              tool_calls with each function.arguments JSON string parsed into a value ({} when
//              it does not parse; an empty list is dropped), reasoning, tool_call_id, name;
//   tools    - each {"type": "function", "function": {"name", "description", "parameters",
//              ...}} with description/parameters null when absent (pydantic's model_dump()),
//              or none without tools;
//   add_generation_prompt - the request's (a vLLM extension; default true), documents (none),
//   the model's special tokens, and the request's chat_template_kwargs on top.
// Strings and objects carry their JSON path as provenance ("messages[2].content", "tools[0]").
// Non-text content parts (images, audio) are left out: engines add model-specific placeholders.
jinja::Context chat_template_context(const ParsedRequest& request,
                                     const ModelChatTemplates& templates, bool openai_content);

// Renders a chat request through the model's template. segments name the request field each
// verbatim byte range came from (template text is "template"); volatile_tail_begin is where the
// last user message's content starts. A completion request renders as render_prompt(request,
// ChatTemplate::kPlain) does. Errors are the template's (see jinja.h): raise_exception() in a
// template (e.g. "roles must alternate") is kInvalidValue with the template's message.
Result<RenderedPrompt> render_prompt(const ParsedRequest& request,
                                     const ModelChatTemplates& templates,
                                     const ChatRenderOptions& options = {});

}  // namespace prefixgate::canon
