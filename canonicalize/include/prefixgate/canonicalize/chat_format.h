// How a model turns a chat request into prompt text: one of the built-in renderings (render.h),
// or the model's own Jinja templates (chat_template.h). Everything that renders a prompt (the
// gateway, the engine, prefixlint, the benchmark) holds one of these, so "point it at the model
// folder" changes every one of them at once.
//
//   canon::ChatFormat format = canon::ChatTemplate::kLlama3;            // built-in
//   canon::ChatFormat jinja(std::make_shared<canon::ModelChatTemplates>(*loaded));
//   auto prompt = jinja.render(request, {.now = local_time_now()});
//   if (!prompt) return prompt.error();   // the template raised, or a limit: kInvalidValue
#pragma once

#include <memory>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_template.h"
#include "prefixgate/canonicalize/render.h"

namespace prefixgate::canon {

class ChatFormat {
 public:
  ChatFormat() = default;            // the built-in llama-3 rendering
  ChatFormat(ChatTemplate builtin);  // NOLINT(google-explicit-constructor): a template is a format
  explicit ChatFormat(std::shared_ptr<const ModelChatTemplates> templates);

  // The prompt text of a chat request (a completion request's prompt as-is), with provenance
  // segments. Built-in renderings cannot fail; a model's template can (raise_exception(), a
  // render limit): those errors are the client's (kInvalidValue, kTooLarge), as an engine
  // rendering the same template would answer them.
  Result<RenderedPrompt> render(const ParsedRequest& request,
                                const ChatRenderOptions& options = {}) const;
  // The same into `out` (left as it was on an error): a built-in rendering reuses its room.
  Status render_into(const ParsedRequest& request, const ChatRenderOptions& options,
                     RenderedPrompt& out) const;

  // The model's templates, or nullptr for a built-in rendering.
  const ModelChatTemplates* templates() const { return templates_.get(); }
  ChatTemplate builtin() const { return builtin_; }
  // "llama-3", "chatml", "plain", or "model" for a model's own template.
  std::string name() const;
  // Whether the prompt carries today's date (a template calling strftime_now()): such a prefix
  // changes daily, so every cached copy of it is lost at midnight.
  bool uses_strftime_now() const;

 private:
  ChatTemplate builtin_ = ChatTemplate::kLlama3;
  std::shared_ptr<const ModelChatTemplates> templates_;
};

}  // namespace prefixgate::canon
