#include "prefixgate/model_folder/prompt_model.h"

#include <ctime>
#include <filesystem>

#include "prefixgate/model_folder/text_file.h"

namespace prefixgate {
namespace {

namespace fs = std::filesystem;

Error in_file(Error e, const std::string& path) {
  e.message = path + ": " + e.message;
  return e;
}

// The eos_token text tokenizer_config.json sets (a string or an AddedToken's content).
std::string eos_text(const canon::ModelChatTemplates& templates) {
  for (const auto& [name, text] : templates.special_tokens) {
    if (name == "eos_token") return text;
  }
  return {};
}

}  // namespace

Result<LoadedPromptModel> load_prompt_model(const PromptModelSource& source) {
  LoadedPromptModel out;
  std::optional<canon::ChatTemplate> builtin;
  if (!source.chat_template.empty()) {
    auto t = canon::chat_template_from_name(source.chat_template);
    if (!t) return t.error();
    builtin = *t;
  }
  const std::string builtin_name =
      canon::chat_template_name(builtin.value_or(canon::ChatTemplate::kLlama3));

  if (source.tokenizer.empty() || source.tokenizer == "byte") {
    out.tokenizer = canon::make_byte_tokenizer();
    out.chat_format = builtin.value_or(canon::ChatTemplate::kLlama3);
    out.description = "byte + " + builtin_name;
    return out;
  }
  std::error_code ec;
  const bool folder = fs::is_directory(source.tokenizer, ec);
  const std::string tokenizer_path =
      folder ? (fs::path(source.tokenizer) / "tokenizer.json").string() : source.tokenizer;
  auto tokenizer_text = read_text_file(tokenizer_path);
  if (!tokenizer_text) return tokenizer_text.error();
  auto tokenizer = canon::load_tokenizer_json(*tokenizer_text);
  if (!tokenizer) return in_file(tokenizer.error(), tokenizer_path);
  out.tokenizer = std::move(*tokenizer);

  if (!folder || builtin) {
    out.chat_format = builtin.value_or(canon::ChatTemplate::kLlama3);
    out.description = tokenizer_path + " + " + builtin_name;
    return out;
  }
  // A folder without a named template renders with its own.
  const fs::path dir(source.tokenizer);
  const std::string config_path = (dir / "tokenizer_config.json").string();
  const std::string jinja_path = (dir / "chat_template.jinja").string();
  auto config_text = read_text_file(config_path);
  if (!config_text && config_text.error().code != ErrorCode::kNotFound) return config_text.error();
  auto jinja_text = read_text_file(jinja_path);
  if (!jinja_text && jinja_text.error().code != ErrorCode::kNotFound) return jinja_text.error();
  if (!config_text && !jinja_text) {
    return make_error(ErrorCode::kNotFound,
                      source.tokenizer +
                          ": no chat template (neither tokenizer_config.json nor "
                          "chat_template.jinja); name a built-in one (llama-3, chatml, plain)");
  }
  std::optional<std::string_view> jinja;
  if (jinja_text) jinja = *jinja_text;
  auto templates =
      canon::load_chat_templates(config_text ? std::string_view(*config_text) : "{}", jinja);
  if (!templates) return in_file(templates.error(), config_text ? config_path : jinja_path);
  out.eos_token = eos_text(*templates);
  out.chat_format =
      canon::ChatFormat(std::make_shared<const canon::ModelChatTemplates>(std::move(*templates)));
  out.description = source.tokenizer + " (model template)";
  return out;
}

canon::jinja::CivilTime local_time_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return canon::jinja::CivilTime{tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                                 tm.tm_hour,        tm.tm_min,     tm.tm_sec};
}

}  // namespace prefixgate
