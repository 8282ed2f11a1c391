// Loading a model: its shape, its weights, and the tokenizer and chat template it speaks.
//
// Sources:
//   builtin:tiny, builtin:small  deterministic generated weights (a fixed seed) with the byte
//                                tokenizer and the llama-3 template: the embedded default for the
//                                demo, tests and benchmarks. Their text is noise; their compute
//                                and caching are real.
//   PATH                         a Hugging Face folder: config.json (LlamaForCausalLM and
//                                compatible), *.safetensors in F32/F16/BF16, tokenizer.json.
//
//   auto model = engine::load_model("builtin:tiny");
//   if (!model) return fail(model.error());
//   auto device = engine::make_cpu_device(*model);   // cpu_device.h
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/render.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "prefixgate/engine/model_spec.h"

namespace prefixgate::engine {

// fp32 weights in host memory, row-major. Linear layers are [out_features, in_features] as in
// PyTorch, so y = x W^T.
struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wq;         // [num_heads * head_dim, hidden]
  std::vector<float> wk;         // [num_kv_heads * head_dim, hidden]
  std::vector<float> wv;         // [num_kv_heads * head_dim, hidden]
  std::vector<float> wo;         // [hidden, num_heads * head_dim]
  std::vector<float> mlp_norm;   // [hidden]
  std::vector<float> w_gate;     // [intermediate, hidden]
  std::vector<float> w_up;       // [intermediate, hidden]
  std::vector<float> w_down;     // [hidden, intermediate]
};

struct ModelWeights {
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to `embed`
};

struct Model {
  ModelSpec spec;
  std::shared_ptr<const ModelWeights> weights;
  std::shared_ptr<const canon::Tokenizer> tokenizer;
  canon::ChatTemplate chat_template = canon::ChatTemplate::kLlama3;
};

// The built-in shapes, without weights (the sim device needs only these).
Result<ModelSpec> builtin_spec(std::string_view name);

// Loads "builtin:tiny", "builtin:small" or a Hugging Face folder. Errors name the file and field.
Result<Model> load_model(std::string_view source);

// Writes weights as a safetensors file (F32, or BF16/F16 when `dtype` says so), with
// config.json beside it: how tests build a Hugging Face folder to load.
Status write_hf_folder(const Model& model, const std::string& folder,
                       std::string_view dtype = "F32");

}  // namespace prefixgate::engine
