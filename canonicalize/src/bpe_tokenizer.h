// A Hugging Face byte-level BPE tokenizer (Llama-3, Qwen2/Qwen3 families), built by
// load_tokenizer_json() (bpe_loader.cpp). The pipeline, as in Hugging Face tokenizers:
//   1. added tokens are found in the raw text (added_tokens.h) and emitted as their ids;
//   2. each stretch of text between them is normalized (NFC, or not at all),
//   3. split into pre-tokens (bpe_pretokenizer.h),
//   4. and each pre-token's bytes are merged into tokens (bpe_model.h).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "added_tokens.h"
#include "bpe_model.h"
#include "bpe_pretokenizer.h"
#include "nfc_normalizer.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

struct BpeTokenizerSpec {
  BpeModel model;
  SplitPattern pattern;
  bool nfc = false;
  std::vector<AddedToken> added_tokens;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerSpec spec);

  std::string_view name() const override { return name_; }
  std::size_t vocab_size() const override { return decode_table_.size(); }
  void encode(std::string_view text, std::vector<TokenId>& out, const EncodeOptions& options,
              std::vector<std::size_t>* byte_offsets) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  std::optional<TokenId> special_token(std::string_view text) const override;
  bool is_special(TokenId id) const override;

 private:
  struct Scratch {
    BpeScratch bpe;
    NfcResult nfc;
  };
  // Encodes text[begin, end), which holds no added token.
  void encode_section(std::string_view text, std::size_t begin, std::size_t end,
                      std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets,
                      Scratch& scratch) const;

  BpeModel model_;
  PreTokenizer pre_tokenizer_;
  std::optional<NfcNormalizer> nfc_;
  AddedTokenMatcher added_;
  std::unordered_map<std::string, TokenId> added_ids_;
  std::vector<TokenId> special_ids_;            // sorted
  std::vector<std::string_view> decode_table_;  // by id: into model_ or added_
  std::string name_;
};

}  // namespace prefixgate::canon::internal
