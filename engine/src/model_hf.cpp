// Hugging Face folders: config.json (LlamaForCausalLM) + *.safetensors + tokenizer.json in,
// config.json + model.safetensors out. Everything in config.json that would change the
// computation and that we do not implement is refused, so a loaded model is never silently
// wrong. Errors name the file and the field or tensor.
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "model_internal.h"
#include "prefixgate/engine/model.h"
#include "prefixgate/model_folder/prompt_model.h"
#include "prefixgate/model_folder/text_file.h"
#include "safetensors.h"

namespace prefixgate::engine {
namespace {

namespace fs = std::filesystem;
namespace dom = simdjson::dom;
using canon::TokenId;

using internal::kChatTemplateKey;
using internal::kTokenizerKey;

// Typed access to config.json's top-level fields; errors carry the file and the field.
class Config {
 public:
  static Result<Config> parse(const std::string& text, std::string path) {
    Config config;
    config.path_ = std::move(path);
    config.padded_ = simdjson::padded_string(text);
    dom::element doc;
    if (const auto err = config.parser_->parse(config.padded_).get(doc); err != simdjson::SUCCESS) {
      return make_error(ErrorCode::kInvalidJson,
                        config.path_ + " is not valid JSON: " + simdjson::error_message(err));
    }
    if (doc.get_object().get(config.root_) != simdjson::SUCCESS) {
      return make_error(ErrorCode::kWrongType, config.path_ + " must hold a JSON object");
    }
    return config;
  }

  // The field, or nullopt when absent or null.
  std::optional<dom::element> get(std::string_view field) const {
    dom::element e;
    if (root_.at_key(field).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
    return e;
  }

  Error wrong_type(std::string_view field, std::string_view expected) const {
    return make_error(ErrorCode::kWrongType,
                      path_ + ": " + std::string(field) + " must be " + std::string(expected),
                      std::string(field));
  }
  Error missing(std::string_view field) const {
    return make_error(ErrorCode::kMissingField, path_ + " has no " + std::string(field),
                      std::string(field));
  }
  Error unsupported(std::string_view field, const std::string& why) const {
    return make_error(ErrorCode::kUnsupported,
                      path_ + ": " + std::string(field) + " " + why + " is not supported",
                      std::string(field));
  }

  Result<std::size_t> size(std::string_view field,
                           std::optional<std::size_t> fallback = std::nullopt) const {
    const auto e = get(field);
    if (!e) {
      if (fallback) return *fallback;
      return missing(field);
    }
    std::uint64_t v = 0;
    if (e->get_uint64().get(v) != simdjson::SUCCESS || v > (1ull << 40)) {
      return wrong_type(field, "a non-negative integer");
    }
    return static_cast<std::size_t>(v);
  }
  Result<double> number(std::string_view field, double fallback) const {
    const auto e = get(field);
    if (!e) return fallback;
    double v = 0;
    if (e->get_double().get(v) != simdjson::SUCCESS) return wrong_type(field, "a number");
    return v;
  }
  Result<bool> boolean(std::string_view field, bool fallback) const {
    const auto e = get(field);
    if (!e) return fallback;
    bool v = false;
    if (e->get_bool().get(v) != simdjson::SUCCESS) return wrong_type(field, "true or false");
    return v;
  }
  Result<std::optional<std::string_view>> string(std::string_view field) const {
    const auto e = get(field);
    if (!e) return std::optional<std::string_view>{};
    std::string_view v;
    if (e->get_string().get(v) != simdjson::SUCCESS) return wrong_type(field, "a string");
    return std::optional<std::string_view>{v};
  }
  // An id or a list of ids (eos_token_id is either).
  Result<std::vector<TokenId>> token_ids(std::string_view field) const {
    std::vector<TokenId> ids;
    const auto e = get(field);
    if (!e) return ids;
    std::uint64_t v = 0;
    if (e->get_uint64().get(v) == simdjson::SUCCESS && v <= UINT32_MAX) {
      ids.push_back(static_cast<TokenId>(v));
      return ids;
    }
    dom::array list;
    if (e->get_array().get(list) != simdjson::SUCCESS) {
      return wrong_type(field, "a token id or a list of token ids");
    }
    for (dom::element item : list) {
      if (item.get_uint64().get(v) != simdjson::SUCCESS || v > UINT32_MAX) {
        return wrong_type(field, "a token id or a list of token ids");
      }
      ids.push_back(static_cast<TokenId>(v));
    }
    return ids;
  }

  const std::string& path() const { return path_; }

 private:
  Config() : parser_(std::make_unique<dom::parser>()) {}

  std::string path_;
  simdjson::padded_string padded_;
  std::unique_ptr<dom::parser> parser_;  // on the heap: elements point into it across moves
  dom::object root_;
};

// Refuses architectures and options whose computation differs from ours.
Status check_architecture(const Config& config) {
  if (const auto arch = config.get("architectures")) {
    dom::array list;
    bool llama = false;
    std::string names;
    if (arch->get_array().get(list) != simdjson::SUCCESS) {
      return config.wrong_type("architectures", "a list of strings");
    }
    for (dom::element item : list) {
      std::string_view name;
      if (item.get_string().get(name) != simdjson::SUCCESS) {
        return config.wrong_type("architectures", "a list of strings");
      }
      llama = llama || name == "LlamaForCausalLM";
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    if (!llama)
      return config.unsupported("architectures", "[" + names + "] (only LlamaForCausalLM)");
  } else {
    auto model_type = config.string("model_type");
    if (!model_type) return model_type.error();
    if (*model_type && **model_type != "llama") {
      return config.unsupported("model_type", "\"" + std::string(**model_type) + "\" (only llama)");
    }
  }
  auto act = config.string("hidden_act");
  if (!act) return act.error();
  if (*act && **act != "silu") {
    return config.unsupported("hidden_act", "\"" + std::string(**act) + "\" (only silu)");
  }
  for (std::string_view bias : {"attention_bias", "mlp_bias"}) {
    auto on = config.boolean(bias, false);
    if (!on) return on.error();
    if (*on) return config.unsupported(bias, "true");
  }
  return {};
}

Result<RopeScaling> read_rope_scaling(const Config& config) {
  RopeScaling scaling;
  const auto e = config.get("rope_scaling");
  if (!e) return scaling;
  dom::object obj;
  if (e->get_object().get(obj) != simdjson::SUCCESS) {
    return config.wrong_type("rope_scaling", "an object or null");
  }
  std::string_view type;
  if (obj["rope_type"].get_string().get(type) != simdjson::SUCCESS &&
      obj["type"].get_string().get(type) != simdjson::SUCCESS) {
    return config.missing("rope_scaling.rope_type");
  }
  if (type == "default") return scaling;
  if (type != "llama3") {
    return config.unsupported("rope_scaling.rope_type",
                              "\"" + std::string(type) + "\" (only llama3 and default)");
  }
  scaling.type = RopeScaling::Type::kLlama3;
  const auto read = [&](std::string_view key, double& out) -> Status {
    const std::string field = "rope_scaling." + std::string(key);
    dom::element v;
    if (obj.at_key(key).get(v) != simdjson::SUCCESS) return config.missing(field);
    if (v.get_double().get(out) != simdjson::SUCCESS) return config.wrong_type(field, "a number");
    return {};
  };
  double original = 0;
  for (const auto& [key, out] : {std::pair<std::string_view, double*>{"factor", &scaling.factor},
                                 {"low_freq_factor", &scaling.low_freq_factor},
                                 {"high_freq_factor", &scaling.high_freq_factor},
                                 {"original_max_position_embeddings", &original}}) {
    if (Status s = read(key, *out); !s) return s.error();
  }
  if (!(original >= 1.0 && original <= 1e9)) {
    return config.wrong_type("rope_scaling.original_max_position_embeddings", "a positive integer");
  }
  scaling.original_max_position = static_cast<std::size_t>(original);
  return scaling;
}

Result<ModelSpec> read_spec(const Config& config) {
  if (Status s = check_architecture(config); !s) return s.error();
  ModelSpec spec;
  const auto read_size = [&](std::string_view field, std::size_t& out,
                             std::optional<std::size_t> fallback) -> Status {
    auto v = config.size(field, fallback);
    if (!v) return v.error();
    out = *v;
    return {};
  };
  for (const auto& [field, out] :
       {std::pair<std::string_view, std::size_t*>{"hidden_size", &spec.hidden_size},
        {"num_hidden_layers", &spec.num_layers},
        {"num_attention_heads", &spec.num_heads},
        {"intermediate_size", &spec.intermediate_size},
        {"vocab_size", &spec.vocab_size}}) {
    if (Status s = read_size(field, *out, std::nullopt); !s) return s.error();
  }
  // transformers' LlamaConfig defaults for the optional fields.
  if (Status s = read_size("num_key_value_heads", spec.num_kv_heads, spec.num_heads); !s) {
    return s.error();
  }
  if (spec.num_heads == 0) return config.wrong_type("num_attention_heads", "positive");
  if (Status s = read_size("head_dim", spec.head_dim, spec.hidden_size / spec.num_heads); !s) {
    return s.error();
  }
  if (Status s = read_size("max_position_embeddings", spec.max_position, 2048); !s) {
    return s.error();
  }
  auto theta = config.number("rope_theta", 10000.0);
  if (!theta) return theta.error();
  spec.rope_theta = *theta;
  auto eps = config.number("rms_norm_eps", 1e-6);
  if (!eps) return eps.error();
  spec.rms_norm_eps = *eps;
  auto tie = config.boolean("tie_word_embeddings", false);
  if (!tie) return tie.error();
  spec.tie_word_embeddings = *tie;
  auto scaling = read_rope_scaling(config);
  if (!scaling) return scaling.error();
  spec.rope_scaling = *scaling;
  return spec;
}

// The tokenizer and chat format: the byte tokenizer when config.json says so; the template
// config.json names (a built-in one), else the folder's own (chat_template.jinja or
// tokenizer_config.json), else a built-in one told from the vocabulary.
Result<LoadedPromptModel> read_prompt_side(const Config& config, const fs::path& folder) {
  auto kind = config.string(kTokenizerKey);
  if (!kind) return kind.error();
  if (*kind && **kind != "byte") {
    return config.unsupported(kTokenizerKey, "\"" + std::string(**kind) + "\" (only byte)");
  }
  auto name = config.string(kChatTemplateKey);
  if (!name) return name.error();
  std::string named;
  if (*name) {
    if (!canon::chat_template_from_name(**name)) {
      return config.unsupported(kChatTemplateKey, "\"" + std::string(**name) + "\"");
    }
    named = std::string(**name);
  }
  if (*kind) return load_prompt_model({.tokenizer = "byte", .chat_template = named});
  auto loaded = load_prompt_model({.tokenizer = folder.string(), .chat_template = named});
  if (loaded || loaded.error().code != ErrorCode::kNotFound || !named.empty()) return loaded;
  // No template of its own: Qwen-style vocabularies mark turns with <|im_start|>, Llama-3's
  // with <|start_header_id|>.
  loaded =
      load_prompt_model({.tokenizer = (folder / "tokenizer.json").string(), .chat_template = ""});
  if (loaded && loaded->tokenizer->special_token("<|im_start|>")) {
    loaded->chat_format = canon::ChatTemplate::kChatml;
  }
  return loaded;
}

// The text of the token that ends an assistant turn: the folder's eos_token for its own
// template, the built-in template's turn end otherwise.
std::string turn_end_text(const LoadedPromptModel& prompt) {
  if (prompt.chat_format.templates() != nullptr) return prompt.eos_token;
  switch (prompt.chat_format.builtin()) {
    case canon::ChatTemplate::kChatml: return "<|im_end|>";
    case canon::ChatTemplate::kLlama3: return "<|eot_id|>";
    case canon::ChatTemplate::kPlain: return "";
  }
  return "";
}

// eos_token is the template's end-of-turn token when config.json lists it (Llama 3.1 lists
// <|end_of_text|> first, but a chat turn ends with <|eot_id|>), otherwise the first listed.
Status read_special_ids(const Config& config, const canon::Tokenizer& tokenizer,
                        const std::string& turn_end_token, ModelSpec& spec) {
  auto eos = config.token_ids("eos_token_id");
  if (!eos) return eos.error();
  // The llama-3 turn end when none is named: a plain-template folder keeps its old behaviour.
  const std::optional<TokenId> turn_end =
      tokenizer.special_token(turn_end_token.empty() ? "<|eot_id|>" : turn_end_token);
  std::vector<TokenId> listed = std::move(*eos);
  if (listed.empty()) {
    if (!turn_end) return config.missing("eos_token_id");
    listed.push_back(*turn_end);
  }
  const bool turn_end_listed =
      turn_end && std::find(listed.begin(), listed.end(), *turn_end) != listed.end();
  spec.eos_token = turn_end_listed ? *turn_end : listed.front();
  spec.eos_tokens = {spec.eos_token};
  for (TokenId id : listed) {
    if (id != spec.eos_token) spec.eos_tokens.push_back(id);
  }
  // The template writes the end-of-turn token after every turn, so generating it ends the reply
  // even when config.json only lists end-of-text.
  if (turn_end && !turn_end_listed) spec.eos_tokens.push_back(*turn_end);

  auto bos = config.token_ids("bos_token_id");
  if (!bos) return bos.error();
  if (!bos->empty()) {
    spec.bos_token = bos->front();
  } else {
    spec.bos_token = tokenizer.special_token("<|begin_of_text|>").value_or(0);
  }
  return {};
}

// Every tensor of every *.safetensors file in the folder, by name.
class TensorIndex {
 public:
  static Result<TensorIndex> open(const fs::path& folder) {
    std::vector<fs::path> paths;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      if (entry.path().extension() == ".safetensors") paths.push_back(entry.path());
    }
    if (ec) return make_error(ErrorCode::kNotFound, folder.string() + ": " + ec.message());
    if (paths.empty()) {
      return make_error(ErrorCode::kNotFound, folder.string() + ": no *.safetensors file");
    }
    std::sort(paths.begin(), paths.end());
    TensorIndex index;
    for (const fs::path& path : paths) {
      auto file = safetensors::SafetensorsFile::open(path.string());
      if (!file) return file.error();
      index.files_.push_back(std::make_unique<safetensors::SafetensorsFile>(std::move(*file)));
    }
    for (const auto& file : index.files_) {
      for (const safetensors::TensorInfo& info : file->tensors()) {
        auto [it, inserted] = index.by_name_.emplace(info.name, Entry{file.get(), &info});
        if (!inserted) {
          return make_error(
              ErrorCode::kInvalidValue,
              file->path() + ": tensor " + info.name + " is also in " + it->second.file->path(),
              info.name);
        }
      }
    }
    return index;
  }

  // Reads tensor `name`, which must have `shape`, into `out` as fp32.
  Status read(const std::string& name, std::vector<std::size_t> shape,
              std::vector<float>& out) const {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return make_error(ErrorCode::kMissingField,
                        folder_name() + ": tensor " + name + " is in no *.safetensors file", name);
    }
    const Entry& e = it->second;
    if (e.info->shape != shape) {
      return make_error(ErrorCode::kInvalidValue,
                        e.file->path() + ": tensor " + name + " has shape " +
                            shape_text(e.info->shape) + ", config.json implies " +
                            shape_text(shape),
                        name);
    }
    out.resize(e.info->numel);
    e.file->read_f32(*e.info, out);
    return {};
  }

 private:
  struct Entry {
    const safetensors::SafetensorsFile* file;
    const safetensors::TensorInfo* info;
  };

  static std::string shape_text(const std::vector<std::size_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  std::string folder_name() const {
    return fs::path(files_.front()->path()).parent_path().string();
  }

  std::vector<std::unique_ptr<safetensors::SafetensorsFile>> files_;  // stable addresses
  std::map<std::string, Entry, std::less<>> by_name_;
};

Result<ModelWeights> read_weights(const TensorIndex& index, const ModelSpec& spec) {
  const std::size_t hidden = spec.hidden_size;
  const std::size_t q_dim = spec.num_heads * spec.head_dim;
  const std::size_t kv_dim = spec.num_kv_heads * spec.head_dim;
  const std::size_t inter = spec.intermediate_size;
  ModelWeights w;
  if (Status s = index.read("model.embed_tokens.weight", {spec.vocab_size, hidden}, w.embed); !s) {
    return s.error();
  }
  w.layers.resize(spec.num_layers);
  for (std::size_t i = 0; i < spec.num_layers; ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::pair<std::string, std::pair<std::vector<std::size_t>, std::vector<float>*>>
        tensors[] = {
            {p + "input_layernorm.weight", {{hidden}, &l.attn_norm}},
            {p + "self_attn.q_proj.weight", {{q_dim, hidden}, &l.wq}},
            {p + "self_attn.k_proj.weight", {{kv_dim, hidden}, &l.wk}},
            {p + "self_attn.v_proj.weight", {{kv_dim, hidden}, &l.wv}},
            {p + "self_attn.o_proj.weight", {{hidden, q_dim}, &l.wo}},
            {p + "post_attention_layernorm.weight", {{hidden}, &l.mlp_norm}},
            {p + "mlp.gate_proj.weight", {{inter, hidden}, &l.w_gate}},
            {p + "mlp.up_proj.weight", {{inter, hidden}, &l.w_up}},
            {p + "mlp.down_proj.weight", {{hidden, inter}, &l.w_down}},
        };
    for (const auto& [name, shape_out] : tensors) {
      if (Status s = index.read(name, shape_out.first, *shape_out.second); !s) {
        return s.error();
      }
    }
  }
  if (Status s = index.read("model.norm.weight", {hidden}, w.final_norm); !s) {
    return s.error();
  }
  // Tied models may still ship lm_head.weight (a copy); the embedding is what they use.
  if (!spec.tie_word_embeddings) {
    if (Status s = index.read("lm_head.weight", {spec.vocab_size, hidden}, w.lm_head); !s) {
      return s.error();
    }
  }
  return w;
}

}  // namespace

namespace internal {

Result<Model> load_hf_folder(const std::string& folder_text, const LoadOptions& options) {
  const fs::path folder = fs::path(folder_text).lexically_normal();
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    return make_error(ErrorCode::kNotFound,
                      folder_text + ": not a folder (nor builtin:tiny or builtin:small)", "model");
  }
  const fs::path config_path = folder / "config.json";
  auto config_text = read_text_file(config_path.string());
  if (!config_text) return config_text.error();
  auto config = Config::parse(*config_text, config_path.string());
  if (!config) return config.error();

  auto spec = read_spec(*config);
  if (!spec) return spec.error();
  spec->id = (folder.has_filename() ? folder : folder.parent_path()).filename().string();

  Model model;
  auto prompt = read_prompt_side(*config, folder);
  if (!prompt) return prompt.error();
  model.tokenizer = std::move(prompt->tokenizer);
  model.chat_format = prompt->chat_format;
  if (model.tokenizer->vocab_size() > spec->vocab_size) {
    return make_error(ErrorCode::kInvalidValue,
                      config->path() + ": vocab_size " + std::to_string(spec->vocab_size) +
                          " is smaller than the tokenizer's " +
                          std::to_string(model.tokenizer->vocab_size()) + " ids",
                      "vocab_size");
  }
  if (Status s = read_special_ids(*config, *model.tokenizer, turn_end_text(*prompt), *spec); !s) {
    return s.error();
  }
  if (Status s = validate_spec(*spec, config->path()); !s) return s.error();
  if (!options.weights) {
    model.spec = std::move(*spec);
    return model;
  }

  auto index = TensorIndex::open(folder);
  if (!index) return index.error();
  auto weights = read_weights(*index, *spec);
  if (!weights) return weights.error();
  model.weights = std::make_shared<const ModelWeights>(std::move(*weights));
  model.spec = std::move(*spec);
  return model;
}

}  // namespace internal

}  // namespace prefixgate::engine
