// Per-model prompt settings (tokenizer, chat format, block size, hash-root model id), loaded
// once at start, and the segment cache every model's tokenization shares (unless turned off).
// A request's `model` picks its entry; unknown models use the default entry.
//
//   auto models = ModelRegistry::load(config.models, config.tokenizer_cache);
//   const ModelEntry& m = models->for_model(request.model);
//   canon::analyze_prompt(request, m.prompt_model);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::gateway::server {

struct ModelEntry {
  std::string name;  // "" for the default entry
  std::shared_ptr<const canon::Tokenizer> tokenizer;
  canon::PromptModel prompt_model;  // borrows `tokenizer`
  TemplateErrorAction template_errors = TemplateErrorAction::kReject;
  std::string description;  // what was loaded, for the start-up log
};

class ModelRegistry {
 public:
  // Errors name the configuration key ("models.qwen3.tokenizer: /models/qwen3: ...").
  static Result<std::unique_ptr<ModelRegistry>> load(const std::vector<ModelConfig>& models,
                                                     const TokenizerCacheConfig& cache = {});
  const ModelEntry& for_model(std::string_view name) const;
  const std::vector<ModelEntry>& entries() const { return entries_; }
  // The segment cache the entries tokenize through; null when turned off.
  const canon::SegmentCache* segment_cache() const { return segment_cache_.get(); }

 private:
  std::unique_ptr<canon::SegmentCache> segment_cache_;
  std::vector<ModelEntry> entries_;  // entries_[0] is the default
};

}  // namespace prefixgate::gateway::server
