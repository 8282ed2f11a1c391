// load_tokenizer_json(): reads a Hugging Face tokenizer.json of model type BPE with simdjson's
// DOM and builds a BpeTokenizer. The normalizer, pre-tokenizer and decoder are read by their own
// modules (tokenizer_normalizer.cpp, tokenizer_pre_tokenizer.cpp, tokenizer_decoder.cpp).
// Everything the file says that would change the ids and that we do not implement is refused
// with kUnsupported naming it, so a loaded tokenizer is never silently wrong.
// Not read, because they do not change what encode() gives: post_processor (it only adds
// BOS/EOS-style tokens, which the caller's chat template writes itself), truncation and padding
// (the caller's limits apply).
#include <xxhash.h>

#include <string>
#include <unordered_map>

#include "bpe_tokenizer.h"
#include "byte_level.h"
#include "tokenizer_json.h"
#include "utf8_decode.h"

namespace prefixgate::canon {
namespace {

using internal::AddedToken;
using internal::BpeAlphabet;
using internal::BpeMergeSpec;
using internal::BpeModel;
using internal::BpeModelSpec;
using internal::BpeTokenizerSpec;
using internal::Field;
using internal::invalid;
using internal::member;
using internal::optional_bool;
using internal::optional_string;
using internal::required_member;
using internal::unsupported;
using internal::wrong_type;
namespace dom = simdjson::dom;

// Ids index dense tables; real vocabularies stay far below this (Gemma 3: 262144).
constexpr std::uint64_t kMaxTokenId = (1u << 22) - 1;

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

Status check_model_options(const Field& model, BpeModelSpec& spec) {
  if (Status s = internal::check_known_keys(
          model, "BPE model",
          {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
           "byte_fallback", "ignore_merges", "vocab", "merges"});
      !s) {
    return s;
  }
  if (auto f = member(model, "dropout"); f && !f->value.is_null()) {
    double p = 0;
    if (f->value.get_double().get(p) != simdjson::SUCCESS) return wrong_type(*f, "a number");
    if (p != 0) return unsupported(f->path, "BPE dropout is random and not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto s = optional_string(model, key);
    if (!s) return s.error();
    if (*s && !(*s)->empty()) {
      return unsupported(model.child_path(key), std::string(key) + " is not supported");
    }
  }
  auto byte_fallback = optional_bool(model, "byte_fallback", false);
  auto fuse_unk = optional_bool(model, "fuse_unk", false);
  auto ignore_merges = optional_bool(model, "ignore_merges", false);
  for (const Result<bool>* r : {&byte_fallback, &fuse_unk, &ignore_merges}) {
    if (!*r) return r->error();
  }
  // Byte-level text never holds a character outside the vocabulary, so byte_fallback and the
  // unknown token change nothing there.
  spec.byte_fallback = *byte_fallback && spec.alphabet == BpeAlphabet::kChars;
  spec.fuse_unknown = *fuse_unk;
  spec.ignore_merges = *ignore_merges;
  return {};
}

// model.vocab into `spec`; `by_text` maps each entry's text to its id, for merges.
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
    if (spec.alphabet == BpeAlphabet::kChars) {
      spec.tokens[id] = std::string(kv.key);
    } else if (auto bytes = byte_level_bytes(kv.key)) {
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
    // Either "left right" (tokenizers < 0.20: exactly one space, as Hugging Face requires)
    // or [left, right].
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
    const std::string path = merges->index_path(rank);
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

Status read_unknown(const Field& model, BpeModelSpec& spec,
                    const std::unordered_map<std::string_view, TokenId>& by_text) {
  auto unk = optional_string(model, "unk_token");
  if (!unk) return unk.error();
  if (!*unk || spec.alphabet == BpeAlphabet::kBytes) return {};
  const auto it = by_text.find(**unk);
  if (it == by_text.end()) {
    return invalid(model.child_path("unk_token"),
                   "\"" + std::string(**unk) + "\" is not in model.vocab");
  }
  spec.unknown = it->second;
  return {};
}

Result<std::vector<AddedToken>> read_added_tokens(
    const Field& root, const std::unordered_map<std::string_view, TokenId>& by_text) {
  std::vector<AddedToken> tokens;
  auto list = member(root, "added_tokens");
  if (!list || list->value.is_null()) return tokens;
  dom::array items;
  if (list->value.get_array().get(items) != simdjson::SUCCESS) {
    return wrong_type(*list, "an array");
  }
  std::size_t index = 0;
  for (const dom::element item : items) {
    const Field f{item, list->index_path(index++)};
    if (!f.value.is_object()) return wrong_type(f, "an object");
    if (Status s = internal::check_known_keys(
            f, "added token",
            {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
        !s) {
      return s.error();
    }
    AddedToken t;
    auto id = required_member(f, "id");
    if (!id) return id.error();
    std::uint64_t id_value = 0;
    if (id->value.get_uint64().get(id_value) != simdjson::SUCCESS || id_value > kMaxTokenId) {
      return make_error(ErrorCode::kInvalidValue,
                        id->path + " must be an id in 0.." + std::to_string(kMaxTokenId), id->path);
    }
    auto content = optional_string(f, "content");
    if (!content) return content.error();
    if (!*content || (*content)->empty()) {
      return make_error(ErrorCode::kInvalidValue, f.path + ".content must be a non-empty string",
                        f.path + ".content");
    }
    t.content = std::string(**content);
    // Hugging Face gives an added token the id its content has in the vocabulary, if any.
    const auto in_vocab = by_text.find(t.content);
    t.id = in_vocab != by_text.end() ? in_vocab->second : static_cast<TokenId>(id_value);
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
    t.special = *special;
    t.lstrip = *lstrip;
    t.rstrip = *rstrip;
    t.single_word = *single_word;
    t.normalized = *normalized;
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
    return unsupported(model->child_path("type"), "model type \"" +
                                                      std::string(model_type->value_or("")) +
                                                      "\" is not supported (only \"BPE\" is)");
  }

  auto normalizer = internal::read_normalizer(root);
  if (!normalizer) return normalizer.error();
  auto pre_tokenizer = internal::read_pre_tokenizer(root);
  if (!pre_tokenizer) return pre_tokenizer.error();
  auto decoder = internal::read_decoder(root);
  if (!decoder) return decoder.error();

  BpeModelSpec model_spec;
  // A ByteLevel pre-tokenizer rewrites text into GPT-2's byte alphabet, in which the vocabulary
  // is written; without one, the vocabulary is plain text (SentencePiece-style, with "▁").
  model_spec.alphabet = pre_tokenizer->byte_level() ? BpeAlphabet::kBytes : BpeAlphabet::kChars;
  if (Status s = check_model_options(*model, model_spec); !s) return s.error();
  std::unordered_map<std::string_view, TokenId> by_text;
  if (Status s = read_vocab(*model, model_spec, by_text); !s) return s.error();
  if (Status s = read_merges(*model, model_spec, by_text); !s) return s.error();
  if (Status s = read_unknown(*model, model_spec, by_text); !s) return s.error();

  auto added = read_added_tokens(root, by_text);
  if (!added) return added.error();

  std::vector<bool> byte_level = model_spec.byte_level;
  auto bpe = BpeModel::create(std::move(model_spec));
  if (!bpe) return bpe.error();
  return std::unique_ptr<Tokenizer>(std::make_unique<internal::BpeTokenizer>(
      BpeTokenizerSpec{std::move(*bpe), std::move(*normalizer), std::move(*pre_tokenizer),
                       std::move(*decoder), std::move(*added), std::move(byte_level),
                       XXH3_64bits(tokenizer_json.data(), tokenizer_json.size())}));
}

}  // namespace prefixgate::canon
