// The flags that say how prompts become tokens (--tokenizer, --template, --block-size, --model)
// and which API shape the inputs are (--api), shared by every prefixlint subcommand, and the
// loaded model they describe.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/prompt.h"

namespace prefixgate::lint {

struct ModelFlags {
  // "byte", a Hugging Face tokenizer.json, or a model folder (its tokenizer and chat template)
  std::string tokenizer = "byte";
  std::string chat_template;  // a built-in name; "" = the folder's own template, else llama-3
  std::size_t block_size = canon::kDefaultBlockSize;
  std::string model_id = "builtin:tiny";
  std::string granularity = "1h";  // timestamp rounding of the canonicalization policy
  std::string api = "auto";        // the inputs' shape: auto (from each body), chat, completions,
                                   // messages (Anthropic) or responses (OpenAI Responses)
};

void add_model_flags(CLI::App& app, ModelFlags& flags, bool with_policy);

struct LoadedModel {
  std::shared_ptr<const canon::Tokenizer> tokenizer;
  canon::PromptModel model;
  canon::CanonicalizationPolicy policy;
  // The date a template's strftime_now() writes: today, as the engine would render it.
  canon::ChatRenderOptions render;
};

// The shape --api names; nullopt for auto.
std::optional<canon::Api> forced_api(const ModelFlags& flags);

// Loads the tokenizer and resolves the template; errors name the flag.
Result<LoadedModel> load_model(const ModelFlags& flags);

// "90s", "15m", "1h", "1d" -> seconds. kInvalidValue otherwise.
Result<std::chrono::seconds> parse_duration(const std::string& text);

}  // namespace prefixgate::lint
