// The shape of a Llama-architecture decoder: what the scheduler, the devices and the KV pool
// need to know about a model, whatever its weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::engine {

struct ModelSpec {
  std::string id;  // "builtin:tiny", or the folder name of a Hugging Face model
  std::size_t num_layers = 0;
  std::size_t hidden_size = 0;
  std::size_t num_heads = 0;     // query heads
  std::size_t num_kv_heads = 0;  // grouped-query attention: num_heads % num_kv_heads == 0
  std::size_t head_dim = 0;
  std::size_t intermediate_size = 0;
  std::size_t vocab_size = 0;
  std::size_t max_position = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  canon::TokenId eos_token = 0;
  canon::TokenId bos_token = 0;

  // Parameters, for memory and the sim device's bandwidth model.
  std::size_t parameter_count() const;
  // Bytes of K and V for one token across all layers, at `bytes_per_element`.
  std::size_t kv_bytes_per_token(std::size_t bytes_per_element) const {
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_element;
  }
};

}  // namespace prefixgate::engine
