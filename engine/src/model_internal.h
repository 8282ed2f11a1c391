// Pieces of model loading shared by model.cpp, model_builtin.cpp, model_hf.cpp and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "prefixgate/engine/model.h"

namespace prefixgate::engine::internal {

// The seed of the built-in models' weights: changing it changes every builtin output.
inline constexpr std::uint64_t kBuiltinSeed = 0x5eed'0f'9a7e'2024ull;

// config.json fields of ours (transformers ignores them): the byte tokenizer has no
// tokenizer.json, and its template cannot be told from its specials (it has both llama-3's and
// chatml's). A folder whose tokenizer is not the byte tokenizer needs its tokenizer.json copied
// beside what write_hf_folder() writes.
inline constexpr std::string_view kTokenizerKey = "prefixgate_tokenizer";
inline constexpr std::string_view kChatTemplateKey = "prefixgate_chat_template";

// Deterministic weights for `spec` from `seed`: linear layers uniform in [-a, a] with
// a = 1/sqrt(fan_in), embeddings uniform in [-1, 1], norms 1 + uniform [-0.1, 0.1]. Each tensor
// draws from its own counter-based stream, so the result depends only on (spec, seed).
ModelWeights generate_weights(const ModelSpec& spec, std::uint64_t seed);

// A model with generated weights, the byte tokenizer and the llama-3 template; `spec` must use
// the byte tokenizer's vocabulary (its vocab_size at least the byte tokenizer's).
Model make_generated_model(ModelSpec spec, std::uint64_t seed);

// Checks the invariants every device relies on (GQA divisibility, even head_dim, ids in the
// vocabulary). `source` names where the spec came from, for the message.
Status validate_spec(const ModelSpec& spec, std::string_view source);

// A Hugging Face folder (see model.h).
Result<Model> load_hf_folder(const std::string& folder, const LoadOptions& options);

}  // namespace prefixgate::engine::internal
