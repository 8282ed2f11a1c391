// Loading a model: its shape, its weights, and the tokenizer and chat template it speaks.
//
// Sources:
//   builtin:tiny, builtin:small  deterministic generated weights (a fixed seed) with the byte
//                                tokenizer and the llama-3 template: the embedded default for the
//                                demo, tests and benchmarks. Their text is noise; their compute
//                                and caching are real.
//   PATH                         a Hugging Face folder: config.json (LlamaForCausalLM and
//                                compatible), *.safetensors in F32/F16/BF16, tokenizer.json,
//                                and the model's chat template (chat_template.jinja or
//                                tokenizer_config.json's), rendered as transformers does.
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
#include "prefixgate/canonicalize/chat_format.h"
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
  canon::ChatFormat chat_format;  // built-in llama-3 unless the model brings its own template
};

struct LoadOptions {
  // Read *.safetensors. Off for the sim device, which needs only the shape: a folder with
  // config.json and the tokenizer files is then enough.
  bool weights = true;
};

// The built-in shapes, without weights (the sim device needs only these).
Result<ModelSpec> builtin_spec(std::string_view name);

// Loads "builtin:tiny", "builtin:small" or a Hugging Face folder. Errors name the file and field.
Result<Model> load_model(std::string_view source, const LoadOptions& options = {});

// Serves `model` with another tokenizer and chat format (the engine's --tokenizer, as vLLM's):
// `tokenizer` is "byte", a tokenizer.json or a model folder (prefixgate/model_folder). The ids
// must fit the model's vocabulary when it has weights; without weights (the sim device) the
// vocabulary becomes the tokenizer's. The end-of-turn token is the folder's eos_token, else the
// built-in template's. Errors: the loader's, and kInvalidValue for a vocabulary too small.
Status use_tokenizer(Model& model, const std::string& tokenizer, const std::string& chat_template);

// Writes weights as a safetensors file (F32, or BF16/F16 when `dtype` says so), with
// config.json beside it: how tests build a Hugging Face folder to load.
Status write_hf_folder(const Model& model, const std::string& folder,
                       std::string_view dtype = "F32");

}  // namespace prefixgate::engine
