// write_hf_folder(): config.json + model.safetensors, the folder load_model() reads back (and
// transformers can load, save for the byte tokenizer, which has no tokenizer.json).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model_internal.h"
#include "prefixgate/engine/model.h"
#include "safetensors.h"

namespace prefixgate::engine {

namespace fs = std::filesystem;
using internal::kChatTemplateKey;
using internal::kTokenizerKey;

Status write_hf_folder(const Model& model, const std::string& folder_text,
                       std::string_view dtype_name) {
  auto dtype = safetensors::dtype_from_name(dtype_name);
  if (!dtype) return dtype.error();
  const fs::path folder(folder_text);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return make_error(ErrorCode::kInvalidValue, folder_text + ": " + ec.message());

  const ModelSpec& spec = model.spec;
  const ModelWeights& w = *model.weights;
  const std::size_t hidden = spec.hidden_size;
  const std::size_t q_dim = spec.num_heads * spec.head_dim;
  const std::size_t kv_dim = spec.num_kv_heads * spec.head_dim;
  const std::size_t inter = spec.intermediate_size;
  std::vector<safetensors::TensorToWrite> tensors;
  tensors.push_back({"model.embed_tokens.weight", {spec.vocab_size, hidden}, w.embed});
  for (std::size_t i = 0; i < spec.num_layers; ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    tensors.push_back({p + "input_layernorm.weight", {hidden}, l.attn_norm});
    tensors.push_back({p + "self_attn.q_proj.weight", {q_dim, hidden}, l.wq});
    tensors.push_back({p + "self_attn.k_proj.weight", {kv_dim, hidden}, l.wk});
    tensors.push_back({p + "self_attn.v_proj.weight", {kv_dim, hidden}, l.wv});
    tensors.push_back({p + "self_attn.o_proj.weight", {hidden, q_dim}, l.wo});
    tensors.push_back({p + "post_attention_layernorm.weight", {hidden}, l.mlp_norm});
    tensors.push_back({p + "mlp.gate_proj.weight", {inter, hidden}, l.w_gate});
    tensors.push_back({p + "mlp.up_proj.weight", {inter, hidden}, l.w_up});
    tensors.push_back({p + "mlp.down_proj.weight", {hidden, inter}, l.w_down});
  }
  tensors.push_back({"model.norm.weight", {hidden}, w.final_norm});
  if (!spec.tie_word_embeddings) {
    tensors.push_back({"lm_head.weight", {spec.vocab_size, hidden}, w.lm_head});
  }
  if (Status s = safetensors::write_file((folder / "model.safetensors").string(), tensors, *dtype);
      !s) {
    return s;
  }

  const auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::string eos = "[";
  for (std::size_t i = 0; i < spec.eos_tokens.size(); ++i) {
    eos += (i ? "," : "") + std::to_string(spec.eos_tokens[i]);
  }
  if (spec.eos_tokens.empty()) eos += std::to_string(spec.eos_token);
  eos += "]";
  const char* torch_dtype = *dtype == safetensors::DType::kF32   ? "float32"
                            : *dtype == safetensors::DType::kF16 ? "float16"
                                                                 : "bfloat16";
  std::string config = "{\n";
  config += "  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n";
  config += "  \"hidden_act\": \"silu\",\n";
  config += "  \"hidden_size\": " + std::to_string(hidden) + ",\n";
  config += "  \"num_hidden_layers\": " + std::to_string(spec.num_layers) + ",\n";
  config += "  \"num_attention_heads\": " + std::to_string(spec.num_heads) + ",\n";
  config += "  \"num_key_value_heads\": " + std::to_string(spec.num_kv_heads) + ",\n";
  config += "  \"head_dim\": " + std::to_string(spec.head_dim) + ",\n";
  config += "  \"intermediate_size\": " + std::to_string(inter) + ",\n";
  config += "  \"vocab_size\": " + std::to_string(spec.vocab_size) + ",\n";
  config += "  \"max_position_embeddings\": " + std::to_string(spec.max_position) + ",\n";
  config += "  \"rms_norm_eps\": " + number(spec.rms_norm_eps) + ",\n";
  config += "  \"rope_theta\": " + number(spec.rope_theta) + ",\n";
  if (spec.rope_scaling.type == RopeScaling::Type::kLlama3) {
    const RopeScaling& s = spec.rope_scaling;
    config += "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": " + number(s.factor) +
              ", \"low_freq_factor\": " + number(s.low_freq_factor) +
              ", \"high_freq_factor\": " + number(s.high_freq_factor) +
              ", \"original_max_position_embeddings\": " + std::to_string(s.original_max_position) +
              "},\n";
  }
  config += std::string("  \"tie_word_embeddings\": ") +
            (spec.tie_word_embeddings ? "true" : "false") + ",\n";
  config += "  \"bos_token_id\": " + std::to_string(spec.bos_token) + ",\n";
  config += "  \"eos_token_id\": " + eos + ",\n";
  if (model.tokenizer && model.tokenizer->name() == "byte") {
    config += "  \"" + std::string(kTokenizerKey) + "\": \"byte\",\n";
  }
  // A model's own template is not written: copy its tokenizer_config.json beside the folder.
  if (model.chat_format.templates() == nullptr) {
    config += "  \"" + std::string(kChatTemplateKey) + "\": \"" +
              canon::chat_template_name(model.chat_format.builtin()) + "\",\n";
  }
  config += std::string("  \"torch_dtype\": \"") + torch_dtype + "\"\n}\n";

  const fs::path config_path = folder / "config.json";
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << config;
  out.close();
  if (!out) return make_error(ErrorCode::kInvalidValue, config_path.string() + ": write failed");
  return {};
}

}  // namespace prefixgate::engine
