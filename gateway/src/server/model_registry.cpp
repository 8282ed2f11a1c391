#include "server/model_registry.h"

#include <algorithm>

#include "prefixgate/model_folder/prompt_model.h"

namespace prefixgate::gateway::server {

Result<std::unique_ptr<ModelRegistry>> ModelRegistry::load(const std::vector<ModelConfig>& models,
                                                           const TokenizerCacheConfig& cache) {
  auto registry = std::make_unique<ModelRegistry>();
  if (cache.enabled) {
    registry->segment_cache_ = std::make_unique<canon::SegmentCache>(canon::SegmentCacheOptions{
        .max_bytes = cache.max_bytes, .min_segment_bytes = cache.min_segment_bytes});
  }
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
    auto loaded = load_prompt_model({.tokenizer = m.tokenizer, .chat_template = m.chat_template});
    if (!loaded) {
      // chat_template names were checked with the configuration: what fails here is the
      // tokenizer, the folder or the folder's template.
      return make_error(loaded.error().code, key + ".tokenizer: " + loaded.error().message,
                        key + ".tokenizer");
    }
    ModelEntry e;
    e.name = m.name;
    e.tokenizer = std::move(loaded->tokenizer);
    e.prompt_model = canon::PromptModel{.chat_format = loaded->chat_format,
                                        .tokenizer = e.tokenizer.get(),
                                        .block_size = m.block_size,
                                        .model_id = m.model_id,
                                        .segment_cache = nullptr,
                                        .remember_block_hashes = cache.enabled};
    // The byte tokenizer is a widening copy: looking a segment up costs more than tokenizing
    // it (gateway_bench's BM_StageTokenize/byte_*), so only real tokenizers use the cache.
    if (e.tokenizer->identity() != canon::make_byte_tokenizer()->identity()) {
      e.prompt_model.segment_cache = registry->segment_cache_.get();
    }
    e.template_errors = m.template_errors;
    e.description = loaded->description;
    registry->entries_.push_back(std::move(e));
  }
  return registry;
}

const ModelEntry& ModelRegistry::for_model(std::string_view name) const {
  for (std::size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i].name == name) return entries_[i];
  }
  return entries_[0];
}

}  // namespace prefixgate::gateway::server
