// Per-model prompt settings (tokenizer, chat template, block size, hash-root model id), loaded
// once at start. A request's `model` picks its entry; unknown models use the default entry.
//
//   auto models = ModelRegistry::load(config.models);   // reads tokenizer.json files
//   const canon::PromptModel& m = models->for_model(request.model);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::gateway::server {

class ModelRegistry {
 public:
  static Result<std::unique_ptr<ModelRegistry>> load(const std::vector<ModelConfig>& models);
  const canon::PromptModel& for_model(std::string_view name) const;

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<canon::Tokenizer> tokenizer;
    canon::PromptModel prompt_model;
  };
  std::vector<Entry> entries_;  // entries_[0] is the default
};

}  // namespace prefixgate::gateway::server
