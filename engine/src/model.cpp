// load_model(): dispatches between the built-in models and Hugging Face folders, and the checks
// on a ModelSpec that every source shares.
#include "prefixgate/engine/model.h"

#include <utility>

#include "model_internal.h"
#include "prefixgate/model_folder/prompt_model.h"

namespace prefixgate::engine {

Result<Model> load_model(std::string_view source, const LoadOptions& options) {
  if (source.starts_with("builtin:")) {
    auto spec = builtin_spec(source);
    if (!spec) return spec.error();
    Model model = internal::make_generated_model(std::move(*spec), internal::kBuiltinSeed);
    if (!options.weights) model.weights.reset();
    return model;
  }
  if (source.empty()) {
    return make_error(ErrorCode::kInvalidValue,
                      "no model given: use builtin:tiny, builtin:small or a Hugging Face folder",
                      "model");
  }
  return internal::load_hf_folder(std::string(source), options);
}

Status use_tokenizer(Model& model, const std::string& tokenizer, const std::string& chat_template) {
  auto loaded = load_prompt_model({.tokenizer = tokenizer, .chat_template = chat_template});
  if (!loaded) return loaded.error();
  const std::size_t vocab = loaded->tokenizer->vocab_size();
  if (model.weights != nullptr && vocab > model.spec.vocab_size) {
    return make_error(ErrorCode::kInvalidValue,
                      tokenizer + ": the tokenizer's " + std::to_string(vocab) +
                          " ids do not fit the model's vocabulary of " +
                          std::to_string(model.spec.vocab_size),
                      "tokenizer");
  }
  if (model.weights == nullptr) model.spec.vocab_size = vocab;
  // The end of an assistant turn in the new token space: the folder's eos_token, else the
  // built-in template's turn end, else what the model had if the tokenizer still has it.
  std::string turn_end = loaded->eos_token;
  if (turn_end.empty() && loaded->chat_format.templates() == nullptr) {
    turn_end =
        loaded->chat_format.builtin() == canon::ChatTemplate::kChatml ? "<|im_end|>" : "<|eot_id|>";
  }
  if (const auto id = loaded->tokenizer->special_token(turn_end)) {
    model.spec.eos_token = *id;
    model.spec.eos_tokens = {*id};
  } else if (model.spec.eos_token >= vocab) {
    return make_error(ErrorCode::kInvalidValue,
                      tokenizer + ": no end-of-turn token (" +
                          (turn_end.empty() ? std::string("none named") : turn_end) +
                          ") in the tokenizer",
                      "tokenizer");
  }
  model.tokenizer = std::move(loaded->tokenizer);
  model.chat_format = loaded->chat_format;
  return {};
}

namespace internal {

Status validate_spec(const ModelSpec& spec, std::string_view source) {
  const auto fail = [&](const std::string& field, const std::string& why) {
    return make_error(ErrorCode::kInvalidValue, std::string(source) + ": " + field + " " + why,
                      field);
  };
  // Far beyond any real model, and small enough that products of two sizes cannot overflow.
  constexpr std::size_t kMaxSize = std::size_t{1} << 24;
  for (const auto& [field, value] :
       {std::pair<const char*, std::size_t>{"num_hidden_layers", spec.num_layers},
        {"hidden_size", spec.hidden_size},
        {"num_attention_heads", spec.num_heads},
        {"num_key_value_heads", spec.num_kv_heads},
        {"head_dim", spec.head_dim},
        {"intermediate_size", spec.intermediate_size},
        {"vocab_size", spec.vocab_size},
        {"max_position_embeddings", spec.max_position}}) {
    if (value > kMaxSize)
      return fail(field, "is implausibly large (" + std::to_string(value) + ")");
  }
  if (spec.num_heads * spec.head_dim > kMaxSize) {
    return fail("head_dim", "times num_attention_heads is implausibly large");
  }
  if (spec.num_layers == 0) return fail("num_hidden_layers", "must be positive");
  if (spec.hidden_size == 0) return fail("hidden_size", "must be positive");
  if (spec.num_heads == 0) return fail("num_attention_heads", "must be positive");
  if (spec.num_kv_heads == 0 || spec.num_heads % spec.num_kv_heads != 0) {
    return fail("num_key_value_heads", "must be positive and divide num_attention_heads (" +
                                           std::to_string(spec.num_heads) + ")");
  }
  if (spec.head_dim == 0 || spec.head_dim % 2 != 0) {
    return fail("head_dim", "must be positive and even (RoPE rotates pairs)");
  }
  if (spec.intermediate_size == 0) return fail("intermediate_size", "must be positive");
  if (spec.vocab_size == 0) return fail("vocab_size", "must be positive");
  if (spec.max_position == 0) return fail("max_position_embeddings", "must be positive");
  if (!(spec.rope_theta > 0.0)) return fail("rope_theta", "must be positive");
  if (!(spec.rms_norm_eps > 0.0)) return fail("rms_norm_eps", "must be positive");
  if (const RopeScaling& s = spec.rope_scaling; s.type == RopeScaling::Type::kLlama3) {
    if (!(s.factor > 0.0) || !(s.low_freq_factor > 0.0) ||
        !(s.high_freq_factor > s.low_freq_factor) || s.original_max_position == 0) {
      return fail("rope_scaling",
                  "needs factor > 0, 0 < low_freq_factor < high_freq_factor "
                  "and original_max_position_embeddings > 0");
    }
  }
  if (spec.bos_token >= spec.vocab_size) return fail("bos_token_id", "is outside the vocabulary");
  for (canon::TokenId id : spec.eos_tokens) {
    if (id >= spec.vocab_size) return fail("eos_token_id", "is outside the vocabulary");
  }
  if (spec.eos_token >= spec.vocab_size) return fail("eos_token_id", "is outside the vocabulary");
  return {};
}

}  // namespace internal
}  // namespace prefixgate::engine
