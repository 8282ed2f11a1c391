// The shape of a Llama-architecture decoder: what the scheduler, the devices and the KV pool
// need to know about a model, whatever its weights.
//
//   auto spec = engine::builtin_spec("builtin:small");   // model.h
//   std::size_t page_bytes = 16 * spec->kv_bytes_per_token(sizeof(float));
//   std::vector<double> inv_freq = spec->rope_inv_freq();  // [head_dim / 2]
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::engine {

// RoPE frequency scaling from config.json's `rope_scaling`. Only Llama 3.1's scheme is
// implemented; the loader refuses the others rather than run a model with wrong positions.
struct RopeScaling {
  enum class Type { kNone, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::size_t original_max_position = 8192;
};

struct ModelSpec {
  std::string id;  // "builtin:tiny", or the folder name of a Hugging Face model
  std::size_t num_layers = 0;
  std::size_t hidden_size = 0;
  std::size_t num_heads = 0;     // query heads
  std::size_t num_kv_heads = 0;  // grouped-query attention: num_heads % num_kv_heads == 0
  std::size_t head_dim = 0;      // even (RoPE rotates pairs)
  std::size_t intermediate_size = 0;
  std::size_t vocab_size = 0;
  std::size_t max_position = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  canon::TokenId eos_token = 0;  // the token that ends an assistant turn
  canon::TokenId bos_token = 0;
  // Every id that ends generation, eos_token first (config.json may list several, as Llama 3.1
  // does: <|end_of_text|>, <|eom_id|>, <|eot_id|>).
  std::vector<canon::TokenId> eos_tokens;

  // Parameters, for memory and the sim device's bandwidth model.
  std::size_t parameter_count() const;
  // Bytes of K and V for one token across all layers, at `bytes_per_element`.
  std::size_t kv_bytes_per_token(std::size_t bytes_per_element) const {
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_element;
  }
  // RoPE inverse frequencies, [head_dim / 2]: theta^(-2i / head_dim), then rope_scaling. In
  // double so that angles stay exact to fp32 at large positions.
  std::vector<double> rope_inv_freq() const;
  // Whether `token` ends generation.
  bool is_eos(canon::TokenId token) const;
};

}  // namespace prefixgate::engine
