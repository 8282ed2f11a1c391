// The built-in models: fixed shapes, weights generated from a seed, the byte tokenizer. Their
// text is noise, but every matrix is dense and every step is the real computation, so they
// measure the engine and the cache honestly without a download.
#include <cmath>
#include <utility>

#include "model_internal.h"
#include "prefixgate/base/check.h"
#include "prefixgate/engine/model.h"

namespace prefixgate::engine {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): element i of a stream is mix(stream_seed + i), so any
// tensor can be generated independently of the others.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class TensorGenerator {
 public:
  explicit TensorGenerator(std::uint64_t seed) : seed_(seed) {}

  // `count` values of offset + uniform [-a, a], from the next stream.
  std::vector<float> uniform(std::size_t count, double a, double offset = 0.0) {
    const std::uint64_t stream = splitmix64(seed_ ^ splitmix64(++streams_));
    std::vector<float> out(count);
    for (std::size_t i = 0; i < count; ++i) {
      const double u = static_cast<double>(splitmix64(stream + i) >> 11) * 0x1.0p-53;  // [0, 1)
      out[i] = static_cast<float>(offset + a * (2.0 * u - 1.0));
    }
    return out;
  }
  std::vector<float> linear(std::size_t out_features, std::size_t in_features) {
    return uniform(out_features * in_features, 1.0 / std::sqrt(static_cast<double>(in_features)));
  }
  std::vector<float> norm(std::size_t size) { return uniform(size, 0.1, 1.0); }

 private:
  std::uint64_t seed_;
  std::uint64_t streams_ = 0;
};

ModelSpec byte_model_spec(std::string id) {
  const auto specials = canon::byte_tokenizer_specials();
  const auto special_id = [&](std::string_view text) {
    for (std::size_t i = 0; i < specials.size(); ++i) {
      if (specials[i] == text) return static_cast<canon::TokenId>(256 + i);
    }
    return canon::TokenId{0};
  };
  ModelSpec spec;
  spec.id = std::move(id);
  spec.vocab_size = 256 + specials.size();
  spec.eos_token = special_id("<|eot_id|>");
  spec.eos_tokens = {spec.eos_token, special_id("<|end_of_text|>")};
  spec.bos_token = special_id("<|begin_of_text|>");
  spec.max_position = 8192;
  spec.rope_theta = 10000.0;
  spec.rms_norm_eps = 1e-5;
  return spec;
}

}  // namespace

Result<ModelSpec> builtin_spec(std::string_view name) {
  if (name == "builtin:tiny") {
    ModelSpec spec = byte_model_spec("builtin:tiny");
    spec.num_layers = 2;
    spec.hidden_size = 64;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_dim = 16;
    spec.intermediate_size = 128;
    spec.tie_word_embeddings = true;
    return spec;
  }
  if (name == "builtin:small") {
    // Sized so that a 2k-token prefill takes hundreds of ms on a CPU: a cache hit shows.
    ModelSpec spec = byte_model_spec("builtin:small");
    spec.num_layers = 4;
    spec.hidden_size = 256;
    spec.num_heads = 8;
    spec.num_kv_heads = 4;
    spec.head_dim = 32;
    spec.intermediate_size = 768;
    spec.tie_word_embeddings = false;
    return spec;
  }
  return make_error(ErrorCode::kNotFound,
                    "unknown built-in model '" + std::string(name) +
                        "'; built-in models are builtin:tiny and builtin:small",
                    "model");
}

namespace internal {

ModelWeights generate_weights(const ModelSpec& spec, std::uint64_t seed) {
  TensorGenerator gen(seed);
  const std::size_t hidden = spec.hidden_size;
  const std::size_t q_dim = spec.num_heads * spec.head_dim;
  const std::size_t kv_dim = spec.num_kv_heads * spec.head_dim;
  ModelWeights w;
  w.embed = gen.uniform(spec.vocab_size * hidden, 1.0);
  w.layers.resize(spec.num_layers);
  for (LayerWeights& layer : w.layers) {
    layer.attn_norm = gen.norm(hidden);
    layer.wq = gen.linear(q_dim, hidden);
    layer.wk = gen.linear(kv_dim, hidden);
    layer.wv = gen.linear(kv_dim, hidden);
    layer.wo = gen.linear(hidden, q_dim);
    layer.mlp_norm = gen.norm(hidden);
    layer.w_gate = gen.linear(spec.intermediate_size, hidden);
    layer.w_up = gen.linear(spec.intermediate_size, hidden);
    layer.w_down = gen.linear(hidden, spec.intermediate_size);
  }
  w.final_norm = gen.norm(hidden);
  if (!spec.tie_word_embeddings) w.lm_head = gen.linear(spec.vocab_size, hidden);
  return w;
}

Model make_generated_model(ModelSpec spec, std::uint64_t seed) {
  PG_DCHECK(validate_spec(spec, spec.id).ok());
  PG_DCHECK(spec.vocab_size >= canon::make_byte_tokenizer()->vocab_size());
  Model model;
  model.weights = std::make_shared<const ModelWeights>(generate_weights(spec, seed));
  model.spec = std::move(spec);
  model.tokenizer = canon::make_byte_tokenizer();
  model.chat_format = canon::ChatTemplate::kLlama3;
  return model;
}

}  // namespace internal
}  // namespace prefixgate::engine
