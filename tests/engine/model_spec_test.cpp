#include "prefixgate/engine/model_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "model_internal.h"
#include "prefixgate/engine/model.h"

namespace prefixgate::engine {
namespace {

std::size_t count_weights(const ModelWeights& w) {
  std::size_t n = w.embed.size() + w.final_norm.size() + w.lm_head.size();
  for (const LayerWeights& l : w.layers) {
    n += l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() +
         l.mlp_norm.size() + l.w_gate.size() + l.w_up.size() + l.w_down.size();
  }
  return n;
}

TEST(ModelSpecTest, ParameterCountIsTheNumberOfWeights) {
  for (std::string_view name : {"builtin:tiny", "builtin:small"}) {
    auto model = load_model(name);
    ASSERT_TRUE(model.ok());
    EXPECT_EQ(model->spec.parameter_count(), count_weights(*model->weights)) << name;
  }
  // Llama-3.2-1B's published shape: 1,235,814,400 parameters (tied embeddings).
  ModelSpec llama;
  llama.num_layers = 16;
  llama.hidden_size = 2048;
  llama.num_heads = 32;
  llama.num_kv_heads = 8;
  llama.head_dim = 64;
  llama.intermediate_size = 8192;
  llama.vocab_size = 128256;
  llama.tie_word_embeddings = true;
  EXPECT_EQ(llama.parameter_count(), 1235814400u);
}

TEST(ModelSpecTest, BuiltinShapesAndSpecialTokens) {
  auto tiny = builtin_spec("builtin:tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->num_layers, 2u);
  EXPECT_EQ(tiny->hidden_size, 64u);
  EXPECT_EQ(tiny->num_kv_heads, 2u);
  const auto byte_tokenizer = canon::make_byte_tokenizer();
  EXPECT_EQ(tiny->vocab_size, byte_tokenizer->vocab_size());
  EXPECT_EQ(tiny->eos_token, *byte_tokenizer->special_token("<|eot_id|>"));
  EXPECT_EQ(tiny->bos_token, *byte_tokenizer->special_token("<|begin_of_text|>"));
  EXPECT_TRUE(tiny->is_eos(*byte_tokenizer->special_token("<|end_of_text|>")));
  EXPECT_FALSE(tiny->is_eos('a'));
  auto small = builtin_spec("builtin:small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->hidden_size, 256u);
  EXPECT_EQ(small->max_position, 8192u);

  auto unknown = builtin_spec("builtin:huge");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("builtin:tiny"), std::string::npos);
}

TEST(ModelSpecTest, BuiltinWeightsAreDeterministicAndScaledByFanIn) {
  auto a = load_model("builtin:tiny");
  auto b = load_model("builtin:tiny");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->weights->layers[1].wq, b->weights->layers[1].wq);
  EXPECT_EQ(a->weights->embed, b->weights->embed);
  EXPECT_NE(a->weights->layers[0].wq, a->weights->layers[1].wq);  // separate streams
  EXPECT_EQ(a->chat_format.builtin(), canon::ChatTemplate::kLlama3);
  EXPECT_EQ(a->tokenizer->name(), "byte");

  const ModelWeights other = internal::generate_weights(a->spec, 1);
  EXPECT_NE(other.layers[0].wq, a->weights->layers[0].wq);

  const double bound = 1.0 / std::sqrt(64.0);
  double max_abs = 0;
  for (float v : a->weights->layers[0].wq) max_abs = std::max(max_abs, std::abs(double{v}));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.9 * bound);
  for (float v : a->weights->layers[0].attn_norm) {
    EXPECT_GE(v, 0.9f);
    EXPECT_LE(v, 1.1f);
  }
}

TEST(ModelSpecTest, RopeFrequenciesWithoutScaling) {
  ModelSpec spec;
  spec.head_dim = 8;
  spec.rope_theta = 10000.0;
  const auto f = spec.rope_inv_freq();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[1], 0.1);
  EXPECT_DOUBLE_EQ(f[2], 0.01);
  EXPECT_NEAR(f[3], 0.001, 1e-18);
}

TEST(ModelSpecTest, Llama3RopeScalingKeepsHighStretchesLowAndBlendsBetween) {
  // Llama 3.1's values: factor 8, low 1, high 4, original context 8192, theta 500000.
  ModelSpec spec;
  spec.head_dim = 128;
  spec.rope_theta = 500000.0;
  ModelSpec scaled = spec;
  scaled.rope_scaling = {.type = RopeScaling::Type::kLlama3,
                         .factor = 8.0,
                         .low_freq_factor = 1.0,
                         .high_freq_factor = 4.0,
                         .original_max_position = 8192};
  const auto plain = spec.rope_inv_freq();
  const auto f = scaled.rope_inv_freq();
  std::size_t kept = 0, stretched = 0, blended = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_DOUBLE_EQ(f[i], plain[i]);
      ++kept;
    } else if (wavelen > 8192.0) {
      EXPECT_DOUBLE_EQ(f[i], plain[i] / 8);
      ++stretched;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(f[i], (1 - smooth) * plain[i] / 8 + smooth * plain[i], 1e-15);
      EXPECT_LT(f[i], plain[i]);
      EXPECT_GT(f[i], plain[i] / 8);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0u);
  EXPECT_GT(stretched, 0u);
  EXPECT_GT(blended, 0u);
}

}  // namespace
}  // namespace prefixgate::engine
