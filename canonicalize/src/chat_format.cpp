#include "prefixgate/canonicalize/chat_format.h"

namespace prefixgate::canon {

ChatFormat::ChatFormat(ChatTemplate builtin) : builtin_(builtin) {}

ChatFormat::ChatFormat(std::shared_ptr<const ModelChatTemplates> templates)
    : templates_(std::move(templates)) {}

Result<RenderedPrompt> ChatFormat::render(const ParsedRequest& request,
                                          const ChatRenderOptions& options) const {
  if (templates_ == nullptr) return render_prompt(request, builtin_);
  return render_prompt(request, *templates_, options);
}

Status ChatFormat::render_into(const ParsedRequest& request, const ChatRenderOptions& options,
                               RenderedPrompt& out) const {
  if (templates_ == nullptr) {
    render_prompt_into(request, builtin_, out);
    return {};
  }
  auto rendered = render_prompt(request, *templates_, options);
  if (!rendered) return rendered.error();
  out = std::move(*rendered);
  return {};
}

std::string ChatFormat::name() const {
  return templates_ == nullptr ? chat_template_name(builtin_) : "model";
}

bool ChatFormat::uses_strftime_now() const {
  return templates_ != nullptr && templates_->uses_strftime_now();
}

}  // namespace prefixgate::canon
