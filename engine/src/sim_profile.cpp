// The sim device's catalog of GPUs and model shapes, and the "GPU:MODEL[@DTYPE]" parser.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "prefixgate/engine/model.h"
#include "prefixgate/engine/sim_device.h"

namespace prefixgate::engine {
namespace {

constexpr double kTera = 1e12;
// Datasheets give memory in "GB" that are binary: an H100 SXM "80GB" shows 81,559 MiB in
// nvidia-smi and an A100 "80GB" 81,920 MiB. Counting them as GiB is the closer reading.
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct GpuEntry {
  const char* name;
  const char* alias;  // or nullptr
  GpuSpec (*make)();
};

// NVIDIA datasheets quote tensor-core rates "with sparsity" (2:4 structured); the dense rates
// below are half of those. A model's matmuls are dense.
const std::array<GpuEntry, 4> kGpus = {{
    // NVIDIA H100 Tensor Core GPU datasheet, SXM5 column: BF16 1,979 TFLOPS and FP8
    // 3,958 TFLOPS with sparsity; 80 GB HBM3 at 3.35 TB/s.
    {"h100-sxm", "h100",
     [] {
       return GpuSpec{"h100-sxm", 989 * kTera, 1979 * kTera, 3.35 * kTera, 80 * kGiB};
     }},
    // NVIDIA H200 Tensor Core GPU datasheet, SXM column: the H100's GH100 compute (same
    // tensor-core rates) with 141 GB HBM3e at 4.8 TB/s.
    {"h200", "h200-sxm",
     [] {
       return GpuSpec{"h200", 989 * kTera, 1979 * kTera, 4.8 * kTera, 141 * kGiB};
     }},
    // NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column: BF16 312 TFLOPS dense
    // (624 with sparsity), 2,039 GB/s HBM2e. Ampere has no FP8 tensor cores.
    {"a100-80gb", "a100",
     [] {
       return GpuSpec{"a100-80gb", 312 * kTera, 0, 2.039 * kTera, 80 * kGiB};
     }},
    // NVIDIA L4 Tensor Core GPU datasheet: BF16 242 TFLOPS and FP8 485 TFLOPS with sparsity;
    // 24 GB GDDR6 at 300 GB/s.
    {"l4", nullptr,
     [] {
       return GpuSpec{"l4", 121 * kTera, 242.5 * kTera, 0.3 * kTera, 24 * kGiB};
     }},
}};

struct ModelEntry {
  const char* name;
  WeightDtype default_weights;
  ModelSpec (*make)();
};

ModelSpec llama_spec(const char* id, std::size_t layers, std::size_t hidden, std::size_t heads,
                     std::size_t kv_heads, std::size_t intermediate, std::size_t vocab,
                     std::size_t max_position, double rope_theta, double rms_norm_eps,
                     canon::TokenId bos, canon::TokenId eos) {
  ModelSpec spec;
  spec.id = id;
  spec.num_layers = layers;
  spec.hidden_size = hidden;
  spec.num_heads = heads;
  spec.num_kv_heads = kv_heads;
  spec.head_dim = hidden / heads;
  spec.intermediate_size = intermediate;
  spec.vocab_size = vocab;
  spec.max_position = max_position;
  spec.rope_theta = rope_theta;
  spec.rms_norm_eps = rms_norm_eps;
  spec.tie_word_embeddings = false;
  spec.bos_token = bos;
  spec.eos_token = eos;
  return spec;
}

const std::array<ModelEntry, 5> kModels = {{
    // meta-llama/Meta-Llama-3-8B-Instruct config.json. eos is <|eot_id|> (128009), the end of
    // an assistant turn, which generation_config.json lists with <|end_of_text|>.
    {"llama3-8b", WeightDtype::kBf16,
     [] {
       return llama_spec("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0, 1e-5, 128000,
                         128009);
     }},
    // meta-llama/Meta-Llama-3-70B-Instruct config.json. FP8 by default: its BF16 weights
    // (141 GB) exceed what one 80 or 141 GB GPU can give them, and tensor parallelism is not
    // modelled; one-GPU 70B deployments serve FP8 checkpoints (for example
    // neuralmagic/Meta-Llama-3-70B-Instruct-FP8). "@bf16" asks for BF16 anyway.
    {"llama3-70b", WeightDtype::kFp8,
     [] {
       return llama_spec("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0, 1e-5, 128000,
                         128009);
     }},
    // Qwen/Qwen2.5-7B-Instruct config.json (bos <|endoftext|> 151643, eos <|im_end|> 151645).
    // Its q/k/v biases (0.13M parameters) are not in ModelSpec and are ignored here.
    {"qwen2.5-7b", WeightDtype::kBf16,
     [] {
       return llama_spec("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 32768, 1000000.0, 1e-6,
                         151643, 151645);
     }},
    // The built-in models, with the shapes the cpu device runs (one definition: builtin_spec).
    {"builtin:tiny", WeightDtype::kBf16, [] { return *builtin_spec("builtin:tiny"); }},
    {"builtin:small", WeightDtype::kBf16, [] { return *builtin_spec("builtin:small"); }},
}};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / kGiB);
  return buf;
}

Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidValue, std::move(message));
}

constexpr const char* kSyntax = "expected GPU:MODEL or GPU:MODEL@DTYPE (DTYPE bf16 or fp8)";

}  // namespace

std::vector<std::string> sim_gpu_names() {
  std::vector<std::string> names;
  for (const GpuEntry& gpu : kGpus) names.emplace_back(gpu.name);
  for (const GpuEntry& gpu : kGpus) {
    if (gpu.alias != nullptr) names.emplace_back(gpu.alias);
  }
  return names;
}

std::vector<std::string> sim_model_names() {
  std::vector<std::string> names;
  for (const ModelEntry& model : kModels) names.emplace_back(model.name);
  return names;
}

Result<SimProfile> parse_sim_profile(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return invalid("invalid sim profile \"" + std::string(text) + "\": " + kSyntax);
  }
  const std::string_view gpu_name = text.substr(0, colon);
  std::string_view model_name = text.substr(colon + 1);
  std::optional<WeightDtype> dtype;
  if (const std::size_t at = model_name.rfind('@'); at != std::string_view::npos) {
    const std::string_view dtype_name = model_name.substr(at + 1);
    if (dtype_name == "bf16") {
      dtype = WeightDtype::kBf16;
    } else if (dtype_name == "fp8") {
      dtype = WeightDtype::kFp8;
    } else {
      return invalid("invalid sim profile \"" + std::string(text) + "\": unknown weight dtype \"" +
                     std::string(dtype_name) + "\"; choices: bf16, fp8");
    }
    model_name = model_name.substr(0, at);
  }

  const GpuEntry* gpu = nullptr;
  for (const GpuEntry& entry : kGpus) {
    if (gpu_name == entry.name || (entry.alias != nullptr && gpu_name == entry.alias)) {
      gpu = &entry;
    }
  }
  if (gpu == nullptr) {
    return invalid("unknown sim GPU \"" + std::string(gpu_name) +
                   "\"; choices: " + join(sim_gpu_names()));
  }
  const ModelEntry* model = nullptr;
  for (const ModelEntry& entry : kModels) {
    if (model_name == entry.name) model = &entry;
  }
  if (model == nullptr) {
    return invalid("unknown sim model \"" + std::string(model_name) +
                   "\"; choices: " + join(sim_model_names()));
  }

  SimProfile profile;
  profile.gpu = gpu->make();
  profile.model = model->make();
  profile.weights = dtype.value_or(model->default_weights);
  profile.name = profile.gpu.name + ":" + profile.model.id +
                 (profile.weights == WeightDtype::kFp8 ? "@fp8" : "@bf16");

  // Like vLLM, refuse a configuration whose KV cache cannot hold one sequence of the model's
  // full context: it would start and then fail on the first long request.
  const SimMemoryPlan plan = sim_memory_plan(profile);
  if (plan.kv_tokens < profile.model.max_position) {
    const double need = static_cast<double>(profile.model.max_position) *
                        static_cast<double>(profile.model.kv_bytes_per_token(2));
    std::string message =
        profile.name + " does not fit: of " + gib(plan.usable_bytes) + " usable, weights take " +
        gib(plan.weight_bytes) + " and activations " + gib(plan.reserve_bytes) + ", leaving " +
        gib(std::max(plan.kv_bytes, 0.0)) + " for KV, less than one " +
        std::to_string(profile.model.max_position) + "-token sequence (" + gib(need) + ")";
    if (profile.weights == WeightDtype::kBf16) {
      message += "; try " + profile.gpu.name + ":" + profile.model.id + "@fp8";
    }
    message += " (tensor parallelism is not modelled)";
    return invalid(std::move(message));
  }
  return profile;
}

Result<double> parse_sim_speedup(std::string_view text) {
  const auto fail = [&] {
    return invalid("invalid sim speedup \"" + std::string(text) +
                   "\": expected a number > 0 (10 runs the clock ten times faster) or inf (no "
                   "waiting)");
  };
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || std::isnan(value) || !(value > 0)) {
    return fail();
  }
  return value;
}

}  // namespace prefixgate::engine
