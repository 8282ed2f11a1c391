#include "model_flags.h"

#include <charconv>

#include "documents.h"
#include "prefixgate/model_folder/prompt_model.h"

namespace prefixgate::lint {

void add_model_flags(CLI::App& app, ModelFlags& flags, bool with_policy) {
  app.add_option("--tokenizer", flags.tokenizer,
                 "'byte' (the embedded default), a Hugging Face tokenizer.json, or a model "
                 "folder (its tokenizer.json and its own chat template)")
      ->capture_default_str();
  app.add_option("--template", flags.chat_template,
                 "a built-in chat template: llama-3, chatml or plain (default: the model "
                 "folder's own, else llama-3)");
  app.add_option("--block-size", flags.block_size, "tokens per prefix-cache block")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--model", flags.model_id, "model id that seeds the block-hash root")
      ->capture_default_str();
  app.add_option("--api", flags.api,
                 "the requests' shape: auto (told from each body), chat, completions, messages "
                 "(Anthropic Messages) or responses (OpenAI Responses)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "chat", "completions", "messages", "responses"}));
  if (with_policy) {
    app.add_option("--granularity", flags.granularity,
                   "timestamp rounding of the canonicalization policy (e.g. 15m, 1h, 1d)")
        ->capture_default_str();
  }
}

std::optional<canon::Api> forced_api(const ModelFlags& flags) {
  return flags.api == "auto" ? std::nullopt : canon::api_from_name(flags.api);
}

Result<std::chrono::seconds> parse_duration(const std::string& text) {
  long long n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  const std::string unit(p, end);
  long long scale = 0;
  if (unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  if (ec != std::errc() || n <= 0 || scale == 0) {
    return make_error(ErrorCode::kInvalidValue,
                      "--granularity: '" + text + "' is not a duration like 15m, 1h or 1d",
                      "--granularity");
  }
  return std::chrono::seconds(n * scale);
}

Result<LoadedModel> load_model(const ModelFlags& flags) {
  LoadedModel out;
  if (!flags.chat_template.empty()) {
    if (auto tmpl = canon::chat_template_from_name(flags.chat_template); !tmpl) {
      return make_error(tmpl.error().code, "--template: " + tmpl.error().message);
    }
  }
  auto loaded =
      load_prompt_model({.tokenizer = flags.tokenizer, .chat_template = flags.chat_template});
  if (!loaded) {
    return make_error(loaded.error().code, "--tokenizer: " + loaded.error().message);
  }
  out.tokenizer = std::move(loaded->tokenizer);
  auto granularity = parse_duration(flags.granularity);
  if (!granularity) return granularity.error();
  out.policy.timestamp_granularity = *granularity;
  out.model = canon::PromptModel{loaded->chat_format, out.tokenizer.get(), flags.block_size,
                                 flags.model_id};
  if (out.model.chat_format.uses_strftime_now()) out.render.now = local_time_now();
  return out;
}

}  // namespace prefixgate::lint
