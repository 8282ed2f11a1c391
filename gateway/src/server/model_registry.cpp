#include "server/model_registry.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "prefixgate/canonicalize/render.h"

namespace prefixgate::gateway::server {
namespace {

Result<std::unique_ptr<canon::Tokenizer>> load_tokenizer(const ModelConfig& m,
                                                         const std::string& key) {
  if (m.tokenizer_path.empty()) return canon::make_byte_tokenizer();
  std::ifstream in(m.tokenizer_path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::kNotFound, key + ": cannot read " + m.tokenizer_path, key);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = canon::load_tokenizer_json(ss.str());
  if (!tok) {
    return make_error(tok.error().code, key + ": " + tok.error().message, key);
  }
  return std::move(*tok);
}

}  // namespace

Result<std::unique_ptr<ModelRegistry>> ModelRegistry::load(const std::vector<ModelConfig>& models) {
  auto registry = std::make_unique<ModelRegistry>();
  std::vector<ModelConfig> all = models;
  // The default entry first: the configured one ("" name) or the embedded defaults.
  auto def =
      std::find_if(all.begin(), all.end(), [](const ModelConfig& m) { return m.name.empty(); });
  if (def == all.end()) {
    all.insert(all.begin(), ModelConfig{});
  } else {
    std::rotate(all.begin(), def, def + 1);
  }
  for (const ModelConfig& m : all) {
    const std::string key = "models." + (m.name.empty() ? std::string("default") : m.name);
    auto tmpl = canon::chat_template_from_name(m.chat_template);
    if (!tmpl) {
      return make_error(tmpl.error().code, key + ".chat_template: " + tmpl.error().message,
                        key + ".chat_template");
    }
    auto tok = load_tokenizer(m, key + ".tokenizer");
    if (!tok) return tok.error();
    Entry e;
    e.name = m.name;
    e.tokenizer = std::move(*tok);
    e.prompt_model = canon::PromptModel{*tmpl, e.tokenizer.get(), m.block_size, m.model_id};
    registry->entries_.push_back(std::move(e));
  }
  return registry;
}

const canon::PromptModel& ModelRegistry::for_model(std::string_view name) const {
  for (std::size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].name == name) return entries_[i].prompt_model;
  }
  return entries_[0].prompt_model;
}

}  // namespace prefixgate::gateway::server
