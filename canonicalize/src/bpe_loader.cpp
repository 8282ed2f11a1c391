// load_tokenizer_json(): reads a Hugging Face tokenizer.json (byte-level BPE) with simdjson's DOM
// and builds a BpeTokenizer. Everything the file says that would change the ids and that we do
// not implement is refused with kUnsupported, so a loaded tokenizer is never silently wrong.
// Not read, because they do not change what encode() gives: post_processor (it only adds
// BOS/EOS-style tokens, which the caller's chat template writes itself), decoder (decode() is
// byte-level by definition), truncation and padding (the caller's limits apply).
#include <simdjson.h>

#include <string>
#include <unordered_map>

#include "bpe_tokenizer.h"
#include "byte_level.h"
#include "utf8_decode.h"

namespace prefixgate::canon {
namespace {

using internal::AddedToken;
using internal::BpeMergeSpec;
using internal::BpeModel;
using internal::BpeModelSpec;
using internal::BpeTokenizerSpec;
using internal::SplitPattern;
namespace dom = simdjson::dom;

// Ids index dense tables; real vocabularies stay far below this (Llama-3: 128256).
constexpr std::uint64_t kMaxTokenId = (1u << 22) - 1;

// The part of `tokenizer.json` being read, for error messages: "model.vocab" and the like.
struct Field {
  dom::element value;
  std::string path;
};

Error wrong_type(const Field& f, const char* expected) {
  return make_error(ErrorCode::kWrongType, f.path + " must be " + expected, f.path);
}

// obj[key], or nullopt when absent.
std::optional<Field> member(const Field& obj, std::string_view key) {
  dom::element e;
  if (obj.value.get_object().at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
  return Field{e, obj.path.empty() ? std::string(key) : obj.path + "." + std::string(key)};
}

Result<Field> required_member(const Field& obj, std::string_view key) {
  auto f = member(obj, key);
  if (!f) {
    const std::string path =
        obj.path.empty() ? std::string(key) : obj.path + "." + std::string(key);
    return make_error(ErrorCode::kMissingField, "tokenizer.json has no " + path, path);
  }
  return *f;
}

// A string member, or nullopt when absent or null.
Result<std::optional<std::string_view>> optional_string(const Field& obj, std::string_view key) {
  auto f = member(obj, key);
  if (!f || f->value.is_null()) return std::optional<std::string_view>{};
  std::string_view s;
  if (f->value.get_string().get(s) != simdjson::SUCCESS) return wrong_type(*f, "a string");
  return std::optional<std::string_view>{s};
}

Result<bool> optional_bool(const Field& obj, std::string_view key, bool absent) {
  auto f = member(obj, key);
  if (!f || f->value.is_null()) return absent;
  bool b = false;
  if (f->value.get_bool().get(b) != simdjson::SUCCESS) return wrong_type(*f, "a boolean");
  return b;
}

Error unsupported(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kUnsupported, what, path);
}

// The raw bytes a vocabulary entry stands for, when it is written in the byte-level alphabet.
std::optional<std::string> byte_level_bytes(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const internal::DecodedCodePoint d = internal::decode_utf8(text, pos);
    const int b = internal::unicode_to_byte(d.cp);
    if (b < 0) return std::nullopt;
    bytes += static_cast<char>(b);
    pos += d.bytes;
  }
  return bytes;
}

Result<bool> read_normalizer(const Field& root) {
  auto f = member(root, "normalizer");
  if (!f || f->value.is_null()) return false;
  if (!f->value.is_object()) return wrong_type(*f, "an object or null");
  auto type = optional_string(*f, "type");
  if (!type) return type.error();
  if (*type == std::optional<std::string_view>("NFC")) return true;
  return unsupported(f->path, "normalizer type \"" + std::string(type->value_or("")) +
                                  "\" is not supported (only null and NFC are)");
}

Status check_byte_level(const Field& f, bool expect_use_regex) {
  auto add_prefix_space = optional_bool(f, "add_prefix_space", true);  // HF's default
  if (!add_prefix_space) return add_prefix_space.error();
  if (*add_prefix_space) {
    return unsupported(f.path + ".add_prefix_space",
                       "ByteLevel with add_prefix_space=true is not supported");
  }
  auto use_regex = optional_bool(f, "use_regex", true);
  if (!use_regex) return use_regex.error();
  if (*use_regex != expect_use_regex) {
    return unsupported(f.path + ".use_regex",
                       expect_use_regex
                           ? "ByteLevel with use_regex=false needs a Split before it"
                           : "ByteLevel after a Split must have use_regex=false (it would "
                             "split a second time)");
  }
  return {};
}

Result<SplitPattern> read_split(const Field& split) {
  auto behavior = optional_string(split, "behavior");
  if (!behavior) return behavior.error();
  if (*behavior != std::optional<std::string_view>("Isolated")) {
    return unsupported(split.path + ".behavior", "only Split behavior \"Isolated\" is supported");
  }
  auto invert = optional_bool(split, "invert", false);
  if (!invert) return invert.error();
  if (*invert)
    return unsupported(split.path + ".invert", "Split with invert=true is not supported");
  auto pattern = required_member(split, "pattern");
  if (!pattern) return pattern.error();
  if (!pattern->value.is_object()) return wrong_type(*pattern, "an object");
  auto regex = optional_string(*pattern, "Regex");
  if (!regex) return regex.error();
  if (!*regex) {
    return unsupported(pattern->path,
                       "only Split patterns of the form {\"Regex\": ...} are supported");
  }
  const auto known = internal::split_pattern_from_regex(**regex);
  if (!known) {
    return unsupported(pattern->path + ".Regex",
                       "unknown pre-tokenizer Split regex " + std::string(**regex) +
                           "; supported are the Llama-3 and Qwen2/Qwen3 patterns and GPT-2's");
  }
  return *known;
}

Result<SplitPattern> read_pre_tokenizer(const Field& root) {
  auto f = required_member(root, "pre_tokenizer");
  if (!f) return f.error();
  if (!f->value.is_object()) {
    return unsupported(f->path, "byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  auto type = optional_string(*f, "type");
  if (!type) return type.error();
  const std::string_view t = type->value_or("");
  if (t == "ByteLevel") {
    if (Status s = check_byte_level(*f, /*expect_use_regex=*/true); !s) return s.error();
    return SplitPattern::kGpt2;
  }
  if (t != "Sequence") {
    return unsupported(f->path, "pre_tokenizer type \"" + std::string(t) +
                                    "\" is not supported (ByteLevel, or Sequence of Split and "
                                    "ByteLevel, are)");
  }
  auto list = required_member(*f, "pretokenizers");
  if (!list) return list.error();
  dom::array items;
  if (list->value.get_array().get(items) != simdjson::SUCCESS) return wrong_type(*list, "an array");
  if (items.size() != 2) {
    return unsupported(list->path, "only a Sequence of [Split, ByteLevel] is supported");
  }
  const Field split{items.at(0).value_unsafe(), list->path + "[0]"};
  const Field byte_level{items.at(1).value_unsafe(), list->path + "[1]"};
  if (!split.value.is_object() || !byte_level.value.is_object()) {
    return wrong_type(split.value.is_object() ? byte_level : split, "an object");
  }
  auto split_type = optional_string(split, "type");
  auto byte_level_type = optional_string(byte_level, "type");
  if (!split_type) return split_type.error();
  if (!byte_level_type) return byte_level_type.error();
  if (*split_type != std::optional<std::string_view>("Split") ||
      *byte_level_type != std::optional<std::string_view>("ByteLevel")) {
    return unsupported(list->path, "only a Sequence of [Split, ByteLevel] is supported");
  }
  if (Status s = check_byte_level(byte_level, /*expect_use_regex=*/false); !s) return s.error();
  return read_split(split);
}

Status check_model_options(const Field& model) {
  if (auto f = member(model, "dropout"); f && !f->value.is_null()) {
    double p = 0;
    if (f->value.get_double().get(p) != simdjson::SUCCESS) return wrong_type(*f, "a number");
    if (p != 0) return unsupported(f->path, "BPE dropout is random and not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto s = optional_string(model, key);
    if (!s) return s.error();
    if (*s && !(*s)->empty()) {
      return unsupported(model.path + "." + key, std::string(key) + " is not supported");
    }
  }
  auto byte_fallback = optional_bool(model, "byte_fallback", false);
  if (!byte_fallback) return byte_fallback.error();
  if (*byte_fallback) {
    return unsupported(model.path + ".byte_fallback", "byte_fallback is not supported");
  }
  return {};
}

// model.vocab into `spec`; `by_text` maps each entry's byte-level text to its id, for merges.
Status read_vocab(const Field& model, BpeModelSpec& spec,
                  std::unordered_map<std::string_view, TokenId>& by_text) {
  auto vocab = required_member(model, "vocab");
  if (!vocab) return vocab.error();
  dom::object entries;
  if (vocab->value.get_object().get(entries) != simdjson::SUCCESS) {
    return wrong_type(*vocab, "an object");
  }
  by_text.reserve(entries.size());
  for (const dom::key_value_pair kv : entries) {
    std::uint64_t id = 0;
    if (kv.value.get_uint64().get(id) != simdjson::SUCCESS || id > kMaxTokenId) {
      return make_error(ErrorCode::kInvalidValue,
                        "model.vocab[\"" + std::string(kv.key) + "\"] must be an id in 0.." +
                            std::to_string(kMaxTokenId),
                        vocab->path);
    }
    if (id >= spec.tokens.size()) {
      spec.tokens.resize(id + 1);
      spec.present.resize(id + 1);
      spec.byte_level.resize(id + 1);
    }
    if (spec.present[id]) {
      return make_error(ErrorCode::kInvalidValue,
                        "model.vocab gives id " + std::to_string(id) + " to two tokens",
                        vocab->path);
    }
    spec.present[id] = true;
    if (auto bytes = byte_level_bytes(kv.key)) {
      spec.tokens[id] = std::move(*bytes);
      spec.byte_level[id] = true;
    } else {
      spec.tokens[id] = std::string(kv.key);  // decodes as its text; text never produces it
    }
    by_text[kv.key] = static_cast<TokenId>(id);
  }
  return {};
}

Status read_merges(const Field& model, BpeModelSpec& spec,
                   const std::unordered_map<std::string_view, TokenId>& by_text) {
  auto merges = required_member(model, "merges");
  if (!merges) return merges.error();
  dom::array list;
  if (merges->value.get_array().get(list) != simdjson::SUCCESS) {
    return wrong_type(*merges, "an array");
  }
  spec.merges.reserve(list.size());
  std::string joined;
  std::size_t rank = 0;
  for (const dom::element item : list) {
    // Either "left right" (tokenizers < 0.20; byte-level tokens hold no space) or [left, right].
    std::string_view left, right;
    std::string_view s;
    dom::array pair;
    bool ok = false;
    if (item.get_string().get(s) == simdjson::SUCCESS) {
      const std::size_t space = s.find(' ');
      ok = space != std::string_view::npos && s.find(' ', space + 1) == std::string_view::npos;
      if (ok) {
        left = s.substr(0, space);
        right = s.substr(space + 1);
      }
    } else if (item.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      ok = pair.at(0).get_string().get(left) == simdjson::SUCCESS &&
           pair.at(1).get_string().get(right) == simdjson::SUCCESS;
    }
    const std::string path = merges->path + "[" + std::to_string(rank) + "]";
    if (!ok) {
      return make_error(ErrorCode::kInvalidValue,
                        path + " must be \"left right\" or [\"left\", \"right\"]", path);
    }
    joined.assign(left);
    joined += right;
    const auto l = by_text.find(left);
    const auto r = by_text.find(right);
    const auto m = by_text.find(joined);
    if (l == by_text.end() || r == by_text.end() || m == by_text.end()) {
      return make_error(ErrorCode::kInvalidValue,
                        path + " merges \"" + std::string(left) + "\" and \"" + std::string(right) +
                            "\", which are not both in model.vocab with "
                            "their concatenation",
                        path);
    }
    spec.merges.push_back(BpeMergeSpec{l->second, r->second, m->second});
    ++rank;
  }
  return {};
}

Result<std::vector<AddedToken>> read_added_tokens(const Field& root, bool nfc) {
  std::vector<AddedToken> tokens;
  auto list = member(root, "added_tokens");
  if (!list || list->value.is_null()) return tokens;
  dom::array items;
  if (list->value.get_array().get(items) != simdjson::SUCCESS) {
    return wrong_type(*list, "an array");
  }
  std::size_t index = 0;
  for (const dom::element item : items) {
    const Field f{item, list->path + "[" + std::to_string(index++) + "]"};
    if (!f.value.is_object()) return wrong_type(f, "an object");
    AddedToken t;
    auto id = required_member(f, "id");
    if (!id) return id.error();
    std::uint64_t id_value = 0;
    if (id->value.get_uint64().get(id_value) != simdjson::SUCCESS || id_value > kMaxTokenId) {
      return make_error(ErrorCode::kInvalidValue,
                        id->path + " must be an id in 0.." + std::to_string(kMaxTokenId), id->path);
    }
    t.id = static_cast<TokenId>(id_value);
    auto content = optional_string(f, "content");
    if (!content) return content.error();
    if (!*content || (*content)->empty()) {
      return make_error(ErrorCode::kInvalidValue, f.path + ".content must be a non-empty string",
                        f.path + ".content");
    }
    t.content = std::string(**content);
    auto special = optional_bool(f, "special", false);
    if (!special) return special.error();
    auto lstrip = optional_bool(f, "lstrip", false);
    auto rstrip = optional_bool(f, "rstrip", false);
    auto single_word = optional_bool(f, "single_word", false);
    // Hugging Face's default: special tokens are matched in the raw text, others after
    // normalization.
    auto normalized = optional_bool(f, "normalized", !*special);
    for (const Result<bool>* r : {&lstrip, &rstrip, &single_word, &normalized}) {
      if (!*r) return r->error();
    }
    if (*single_word) {
      return unsupported(f.path + ".single_word",
                         "added tokens with single_word=true are not supported");
    }
    if (*normalized && nfc) {
      // Matching it in normalized text would differ from matching in the raw text we scan.
      return unsupported(f.path + ".normalized",
                         "added tokens with normalized=true are not supported with a normalizer");
    }
    t.special = *special;
    t.lstrip = *lstrip;
    t.rstrip = *rstrip;
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer_json(std::string_view tokenizer_json) {
  dom::parser parser;
  const simdjson::padded_string padded(tokenizer_json.data(), tokenizer_json.size());
  dom::element doc;
  if (const auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    return make_error(ErrorCode::kInvalidJson, std::string("tokenizer.json is not valid JSON: ") +
                                                   simdjson::error_message(err));
  }
  const Field root{doc, ""};
  if (!doc.is_object()) return wrong_type(Field{doc, "tokenizer.json"}, "a JSON object");

  auto model = required_member(root, "model");
  if (!model) return model.error();
  if (!model->value.is_object()) return wrong_type(*model, "an object");
  auto model_type = optional_string(*model, "type");
  if (!model_type) return model_type.error();
  if (*model_type != std::optional<std::string_view>("BPE")) {
    return unsupported(model->path + ".type",
                       "model type \"" + std::string(model_type->value_or("")) +
                           "\" is not supported (only byte-level \"BPE\" is)");
  }
  if (Status s = check_model_options(*model); !s) return s.error();

  auto nfc = read_normalizer(root);
  if (!nfc) return nfc.error();
  auto pattern = read_pre_tokenizer(root);
  if (!pattern) return pattern.error();

  BpeModelSpec model_spec;
  std::unordered_map<std::string_view, TokenId> by_text;
  if (Status s = read_vocab(*model, model_spec, by_text); !s) return s.error();
  if (Status s = read_merges(*model, model_spec, by_text); !s) return s.error();
  auto ignore_merges = optional_bool(*model, "ignore_merges", false);
  if (!ignore_merges) return ignore_merges.error();
  model_spec.ignore_merges = *ignore_merges;

  auto added = read_added_tokens(root, *nfc);
  if (!added) return added.error();

  auto bpe = BpeModel::create(std::move(model_spec));
  if (!bpe) return bpe.error();
  return std::unique_ptr<Tokenizer>(std::make_unique<internal::BpeTokenizer>(
      BpeTokenizerSpec{std::move(*bpe), *pattern, *nfc, std::move(*added)}));
}

}  // namespace prefixgate::canon
