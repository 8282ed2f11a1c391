// Loading Hugging Face folders: round trips through write_hf_folder, and every way a folder can
// be wrong giving an error that names the file and the field, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model_internal.h"
#include "prefixgate/engine/model.h"
#include "safetensors.h"

namespace prefixgate::engine {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

void replace_in_file(const fs::path& path, std::string_view from, std::string_view to) {
  std::string text = read_file(path);
  const std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  write_file(path, text);
}

class ModelHfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    folder_ = fs::path(::testing::TempDir()) / (std::string("model_hf_") + info->name());
    fs::remove_all(folder_);
    auto model = load_model("builtin:tiny");
    ASSERT_TRUE(model.ok());
    model_ = std::move(*model);
    ASSERT_TRUE(write_hf_folder(model_, folder_.string()).ok());
  }
  void TearDown() override { fs::remove_all(folder_); }

  Error load_error() {
    auto r = load_model(folder_.string());
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  }

  // Rewrites model.safetensors through `edit`, which may change the list of tensors.
  template <class Edit>
  void rewrite_weights(Edit edit) {
    const fs::path path = folder_ / "model.safetensors";
    std::vector<safetensors::TensorToWrite> tensors;
    std::vector<std::vector<float>> storage;
    {
      auto file = safetensors::SafetensorsFile::open(path.string());
      ASSERT_TRUE(file.ok());
      storage.reserve(file->tensors().size());
      for (const auto& info : file->tensors()) {
        storage.emplace_back(info.numel);
        file->read_f32(info, storage.back());
        tensors.push_back({info.name, info.shape, storage.back()});
      }
    }
    edit(tensors);
    ASSERT_TRUE(safetensors::write_file(path.string(), tensors, safetensors::DType::kF32).ok());
  }

  fs::path folder_;
  Model model_;
};

TEST_F(ModelHfTest, RoundTripKeepsSpecWeightsTokenizerAndTemplate) {
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const ModelSpec& a = model_.spec;
  const ModelSpec& b = loaded->spec;
  EXPECT_EQ(b.id, folder_.filename().string());
  EXPECT_EQ(b.num_layers, a.num_layers);
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.num_heads, a.num_heads);
  EXPECT_EQ(b.num_kv_heads, a.num_kv_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.intermediate_size, a.intermediate_size);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.max_position, a.max_position);
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(b.rms_norm_eps, a.rms_norm_eps);
  EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
  EXPECT_EQ(b.eos_token, a.eos_token);
  EXPECT_EQ(b.eos_tokens, a.eos_tokens);
  EXPECT_EQ(b.bos_token, a.bos_token);
  EXPECT_EQ(loaded->tokenizer->name(), "byte");
  EXPECT_EQ(loaded->chat_format.builtin(), canon::ChatTemplate::kLlama3);
  EXPECT_EQ(loaded->chat_format.templates(), nullptr);
  EXPECT_EQ(loaded->weights->embed, model_.weights->embed);
  EXPECT_TRUE(loaded->weights->lm_head.empty());  // tied
  for (std::size_t i = 0; i < a.num_layers; ++i) {
    EXPECT_EQ(loaded->weights->layers[i].wk, model_.weights->layers[i].wk);
    EXPECT_EQ(loaded->weights->layers[i].mlp_norm, model_.weights->layers[i].mlp_norm);
  }
}

TEST_F(ModelHfTest, Bf16RoundTripRoundsEachWeightOnce) {
  ASSERT_TRUE(write_hf_folder(model_, folder_.string(), "BF16").ok());
  EXPECT_NE(read_file(folder_ / "config.json").find("\"bfloat16\""), std::string::npos);
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const std::vector<float>& original = model_.weights->layers[1].w_up;
  std::vector<std::byte> bytes;
  safetensors::from_f32(safetensors::DType::kBF16, original, bytes);
  std::vector<float> rounded(original.size());
  safetensors::to_f32(safetensors::DType::kBF16, bytes.data(), original.size(), rounded.data());
  EXPECT_EQ(loaded->weights->layers[1].w_up, rounded);
  EXPECT_NE(rounded, original);
}

TEST_F(ModelHfTest, UnknownWriteDtypeIsRefused) {
  const Status s = write_hf_folder(model_, folder_.string(), "F8");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnsupported);
}

TEST_F(ModelHfTest, MissingFolderOrConfigIsNotFound) {
  auto none = load_model((folder_ / "nope").string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);

  fs::remove(folder_ / "config.json");
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_NE(e.message.find("config.json"), std::string::npos) << e.message;
}

TEST_F(ModelHfTest, MissingTensorIsNamed) {
  rewrite_weights([](auto& tensors) {
    std::erase_if(tensors,
                  [](const auto& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kMissingField);
  EXPECT_EQ(e.param, "model.layers.1.mlp.up_proj.weight");
  EXPECT_NE(e.message.find("model.layers.1.mlp.up_proj.weight"), std::string::npos);
}

TEST_F(ModelHfTest, UntiedModelNeedsLmHead) {
  replace_in_file(folder_ / "config.json", "\"tie_word_embeddings\": true",
                  "\"tie_word_embeddings\": false");
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kMissingField);
  EXPECT_EQ(e.param, "lm_head.weight");
}

TEST_F(ModelHfTest, WrongShapeIsNamedWithBothShapes) {
  rewrite_weights([](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {64, 32};  // transposed
    }
  });
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kInvalidValue);
  EXPECT_EQ(e.param, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_NE(e.message.find("[64, 32]"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("[32, 64]"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("model.safetensors"), std::string::npos) << e.message;
}

TEST_F(ModelHfTest, TruncatedSafetensorsIsAnErrorNamingTheFile) {
  const fs::path path = folder_ / "model.safetensors";
  const std::string full = read_file(path);
  for (std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{100},
                           full.size() / 2, full.size() - 1}) {
    write_file(path, std::string_view(full).substr(0, size));
    const Error e = load_error();
    EXPECT_EQ(e.code, ErrorCode::kInvalidValue) << size;
    EXPECT_NE(e.message.find("model.safetensors"), std::string::npos) << e.message;
  }
}

TEST_F(ModelHfTest, UnknownDtypeIsUnsupported) {
  replace_in_file(folder_ / "model.safetensors", "\"dtype\":\"F32\"", "\"dtype\":\"F64\"");
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_NE(e.message.find("F64"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("model.safetensors"), std::string::npos) << e.message;
}

TEST_F(ModelHfTest, NoSafetensorsFileIsNotFound) {
  fs::remove(folder_ / "model.safetensors");
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_NE(e.message.find("safetensors"), std::string::npos);
}

TEST_F(ModelHfTest, ShardedWeightsLoadAndDuplicatesAreRefused) {
  const fs::path path = folder_ / "model.safetensors";
  std::vector<safetensors::TensorToWrite> first, second;
  std::vector<std::vector<float>> storage;
  {
    auto file = safetensors::SafetensorsFile::open(path.string());
    ASSERT_TRUE(file.ok());
    storage.reserve(file->tensors().size());
    for (const auto& info : file->tensors()) {
      storage.emplace_back(info.numel);
      file->read_f32(info, storage.back());
      (info.name.find("layers.1.") == std::string::npos ? first : second)
          .push_back({info.name, info.shape, storage.back()});
    }
  }
  fs::remove(path);
  ASSERT_TRUE(safetensors::write_file((folder_ / "model-00001-of-00002.safetensors").string(),
                                      first, safetensors::DType::kBF16)
                  .ok());
  ASSERT_TRUE(safetensors::write_file((folder_ / "model-00002-of-00002.safetensors").string(),
                                      second, safetensors::DType::kF32)
                  .ok());
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->weights->layers[1].wq, model_.weights->layers[1].wq);  // F32 shard

  second.push_back(first.front());
  ASSERT_TRUE(safetensors::write_file((folder_ / "model-00002-of-00002.safetensors").string(),
                                      second, safetensors::DType::kF32)
                  .ok());
  const Error e = load_error();
  EXPECT_EQ(e.code, ErrorCode::kInvalidValue);
  EXPECT_EQ(e.param, first.front().name);
}

TEST_F(ModelHfTest, ConfigErrorsNameTheField) {
  const fs::path config = folder_ / "config.json";
  const std::string original = read_file(config);
  struct Case {
    std::string from, to;
    ErrorCode code;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"\"hidden_size\": 64", "\"hidden_size\": \"64\"", ErrorCode::kWrongType, "hidden_size"},
      {"\"vocab_size\": 263,", "", ErrorCode::kMissingField, "vocab_size"},
      {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", ErrorCode::kInvalidValue,
       "num_key_value_heads"},
      {"\"head_dim\": 16", "\"head_dim\": 15", ErrorCode::kInvalidValue, "head_dim"},
      {"LlamaForCausalLM", "Qwen2ForCausalLM", ErrorCode::kUnsupported, "architectures"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", ErrorCode::kUnsupported,
       "hidden_act"},
      {"\"rope_theta\"", "\"attention_bias\": true, \"rope_theta\"", ErrorCode::kUnsupported,
       "attention_bias"},
      {"\"rope_theta\"",
       "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}, \"rope_theta\"",
       ErrorCode::kUnsupported, "rope_scaling.rope_type"},
      {"\"rope_theta\"",
       "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}, \"rope_theta\"",
       ErrorCode::kMissingField, "rope_scaling.low_freq_factor"},
      {"\"eos_token_id\": [", "\"eos_token_id\": [\"x\",", ErrorCode::kWrongType, "eos_token_id"},
      {"\"bos_token_id\": 256", "\"bos_token_id\": 9999", ErrorCode::kInvalidValue, "bos_token_id"},
      {"\"prefixgate_tokenizer\": \"byte\"", "\"prefixgate_tokenizer\": \"sentencepiece\"",
       ErrorCode::kUnsupported, "prefixgate_tokenizer"},
      {"{", "{]", ErrorCode::kInvalidJson, ""},
  };
  for (const Case& c : cases) {
    write_file(config, original);
    replace_in_file(config, c.from, c.to);
    const Error e = load_error();
    EXPECT_EQ(e.code, c.code) << c.to << ": " << e.message;
    EXPECT_EQ(e.param, c.param) << c.to << ": " << e.message;
    EXPECT_NE(e.message.find("config.json"), std::string::npos) << e.message;
  }
}

TEST_F(ModelHfTest, Llama3RopeScalingIsRead) {
  replace_in_file(folder_ / "config.json", "\"rope_theta\"",
                  "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                  "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                  "\"original_max_position_embeddings\": 8192}, \"rope_theta\"");
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const RopeScaling& s = loaded->spec.rope_scaling;
  EXPECT_EQ(s.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(s.factor, 8.0);
  EXPECT_EQ(s.high_freq_factor, 4.0);
  EXPECT_EQ(s.original_max_position, 8192u);
  // And it survives a write.
  ASSERT_TRUE(write_hf_folder(*loaded, folder_.string()).ok());
  auto again = load_model(folder_.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->spec.rope_scaling.factor, 8.0);
}

// GPT-2's byte-to-unicode map, as UTF-8: printable Latin-1 bytes stand for themselves, the
// others take code points from 256 on.
std::string byte_level_char(unsigned b) {
  const auto printable = [](unsigned x) {
    return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
  };
  unsigned cp = b;
  if (!printable(b)) {
    cp = 256;
    for (unsigned x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    if (cp == '"' || cp == '\\') out += '\\';
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A byte-level BPE tokenizer.json without merges: id = byte, then chatml's specials.
std::string chatml_tokenizer_json() {
  std::string vocab;
  for (unsigned b = 0; b < 256; ++b) {
    vocab += (b ? "," : "") + std::string("\"") + byte_level_char(b) + "\":" + std::to_string(b);
  }
  return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)"
         R"({"id":256,"content":"<|im_start|>","special":true},)"
         R"({"id":257,"content":"<|im_end|>","special":true},)"
         R"({"id":258,"content":"<|endoftext|>","special":true}],"normalizer":null,)"
         R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
         R"("post_processor":null,"decoder":{"type":"ByteLevel"},)"
         R"("model":{"type":"BPE","dropout":null,"unk_token":null,"vocab":{)" +
         vocab + R"(},"merges":[]}})";
}

// A folder that ships its chat template renders with it, and its eos_token ends a turn.
TEST_F(ModelHfTest, TokenizerConfigsChatTemplateIsTheModelsFormat) {
  const fs::path config = folder_ / "config.json";
  replace_in_file(config, "  \"prefixgate_tokenizer\": \"byte\",\n", "");
  replace_in_file(config, ",\n  \"prefixgate_chat_template\": \"llama-3\"", "");
  replace_in_file(config, "\"eos_token_id\": [260,257]", "\"eos_token_id\": [258, 257]");
  write_file(folder_ / "tokenizer.json", chatml_tokenizer_json());
  write_file(folder_ / "tokenizer_config.json",
             R"({"eos_token": {"content": "<|im_end|>", "special": true},
                 "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"})");
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ASSERT_NE(loaded->chat_format.templates(), nullptr);
  EXPECT_EQ(loaded->spec.eos_token, 257u);  // tokenizer_config's eos_token: <|im_end|>
  EXPECT_EQ(loaded->spec.eos_tokens, (std::vector<canon::TokenId>{257, 258}));
  auto request = canon::parse_request(R"({"messages":[{"role":"user","content":"hi"}]})",
                                      canon::Endpoint::kChatCompletions);
  ASSERT_TRUE(request.ok());
  auto prompt = loaded->chat_format.render(*request);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(prompt->text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");

  // A template that does not parse is named with its file.
  write_file(folder_ / "tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  const Error bad = load_error();
  EXPECT_NE(bad.message.find("tokenizer_config.json"), std::string::npos) << bad.message;

  // Without weights (the sim device) the folder needs no *.safetensors.
  write_file(folder_ / "tokenizer_config.json",
             R"({"chat_template": "{{ messages[0].content }}"})");
  for (const auto& entry : fs::directory_iterator(folder_)) {
    if (entry.path().extension() == ".safetensors") fs::remove(entry.path());
  }
  EXPECT_FALSE(load_model(folder_.string()).ok());
  auto shape_only = load_model(folder_.string(), {.weights = false});
  ASSERT_TRUE(shape_only.ok()) << shape_only.error().message;
  EXPECT_EQ(shape_only->weights, nullptr);
}

TEST_F(ModelHfTest, TokenizerJsonWithImStartSelectsChatmlAndItsEndOfTurn) {
  const fs::path config = folder_ / "config.json";
  replace_in_file(config, "  \"prefixgate_tokenizer\": \"byte\",\n", "");
  replace_in_file(config, ",\n  \"prefixgate_chat_template\": \"llama-3\"", "");
  replace_in_file(config, "\"eos_token_id\": [260,257]", "\"eos_token_id\": [258, 257]");
  replace_in_file(config, "\"bos_token_id\": 256,", "");

  const Error no_tokenizer = load_error();
  EXPECT_EQ(no_tokenizer.code, ErrorCode::kNotFound);
  EXPECT_NE(no_tokenizer.message.find("tokenizer.json"), std::string::npos);

  write_file(folder_ / "tokenizer.json", "{\"model\": 5}");
  const Error bad_tokenizer = load_error();
  EXPECT_NE(bad_tokenizer.message.find("tokenizer.json"), std::string::npos);

  write_file(folder_ / "tokenizer.json", chatml_tokenizer_json());
  auto loaded = load_model(folder_.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->chat_format.builtin(), canon::ChatTemplate::kChatml);
  EXPECT_EQ(loaded->chat_format.templates(), nullptr);
  EXPECT_EQ(loaded->tokenizer->vocab_size(), 259u);
  EXPECT_EQ(loaded->spec.eos_token, 257u);  // <|im_end|> ends a chatml turn
  EXPECT_EQ(loaded->spec.eos_tokens, (std::vector<canon::TokenId>{257, 258}));
  EXPECT_EQ(loaded->spec.bos_token, 0u);
  std::vector<canon::TokenId> ids;
  loaded->tokenizer->encode("<|im_start|>hi", ids);
  EXPECT_EQ(ids, (std::vector<canon::TokenId>{256, 'h', 'i'}));

  // A tokenizer with ids beyond the embedding table is refused.
  replace_in_file(config, "\"vocab_size\": 263", "\"vocab_size\": 258");
  rewrite_weights([](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "model.embed_tokens.weight") {
        t.shape = {258, 64};
        t.values = t.values.subspan(0, 258 * 64);
      }
    }
  });
  const Error small_vocab = load_error();
  EXPECT_EQ(small_vocab.param, "vocab_size");
}

}  // namespace
}  // namespace prefixgate::engine
