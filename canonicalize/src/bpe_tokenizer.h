// A Hugging Face BPE tokenizer (byte-level: Llama 3, Qwen, DeepSeek V3, GPT-OSS, Mistral Nemo;
// SentencePiece-style: Llama 2, Mistral 7B, Gemma), built by load_tokenizer_json()
// (bpe_loader.cpp). The pipeline, as in Hugging Face tokenizers:
//   1. added tokens with normalized=false are found in the raw text (added_tokens.h) and
//      emitted as their ids;
//   2. each stretch of text between them is normalized (tokenizer_normalizer.h), and added
//      tokens with normalized=true are found in the result;
//   3. what is left is split into pre-tokens (tokenizer_pre_tokenizer.h),
//   4. and each pre-token is merged into tokens (bpe_model.h).
// decode() runs the tokenizer.json decoder (tokenizer_decoder.h) over the tokens' strings.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "added_tokens.h"
#include "bpe_model.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "tokenizer_decoder.h"
#include "tokenizer_normalizer.h"
#include "tokenizer_pre_tokenizer.h"

namespace prefixgate::canon::internal {

struct BpeTokenizerSpec {
  BpeModel model;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<AddedToken> added_tokens;
  // kBytes models: by id, whether the vocabulary entry was written in the byte-level alphabet
  // (its string for decoders is then re-encoded from the bytes).
  std::vector<bool> byte_level;
  std::uint64_t identity = 0;  // Tokenizer::identity()
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerSpec spec);

  std::string_view name() const override { return name_; }
  std::size_t vocab_size() const override { return id_limit_; }
  std::uint64_t identity() const override { return identity_; }
  void encode(std::string_view text, std::vector<TokenId>& out, const EncodeOptions& options,
              std::vector<std::size_t>* byte_offsets) const override;
  void encode_stretch(std::string_view text, std::size_t begin, std::size_t end,
                      const EncodeOptions& options, std::vector<TokenId>& out,
                      std::vector<std::size_t>& byte_offsets) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  std::optional<TokenId> special_token(std::string_view text) const override;
  bool is_special(TokenId id) const override;

 protected:
  std::size_t added_token_lookahead() const override { return added_lookahead_; }
  bool takes_space_after(TokenId id) const override {
    return std::binary_search(rstrip_ids_.begin(), rstrip_ids_.end(), id);
  }

 private:
  struct Scratch {
    BpeScratch bpe;
    AlignedText normalized;
    std::vector<std::uint32_t> identity;  // origin of an unnormalized section, when needed
    PreTokenizerScratch pre;
    std::vector<std::uint32_t> lengths;
    std::vector<std::size_t> segment_offsets;
  };
  // encode_section through the segment cache (when options has one); returns the key it was
  // looked up by there.
  std::optional<SegmentCache::Key> encode_cached_section(
      std::string_view text, std::size_t begin, std::size_t end, const EncodeOptions& options,
      std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets, Scratch& scratch) const;
  // Encodes text[begin, end), which holds no raw added token.
  void encode_section(std::string_view text, std::size_t begin, std::size_t end,
                      const EncodeOptions& options, std::vector<TokenId>& out,
                      std::vector<std::size_t>* byte_offsets, Scratch& scratch) const;
  // Pre-tokenizes and merges text[begin, end) of a normalized section.
  void encode_pieces(std::string_view text, const std::vector<std::uint32_t>* origin,
                     std::size_t begin, std::size_t end, std::size_t input_offset,
                     std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets,
                     Scratch& scratch) const;
  // The string of token `id` that decoders work on (its tokenizer.json vocabulary key, or an
  // added token's content).
  std::string token_string(TokenId id) const;

  BpeModel model_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  Decoder decoder_;
  AddedTokenMatcher raw_added_;         // normalized=false
  AddedTokenMatcher normalized_added_;  // normalized=true
  std::unordered_map<std::string, TokenId> added_ids_;
  std::unordered_map<TokenId, std::string> added_content_;
  std::vector<TokenId> special_ids_;  // sorted
  std::vector<TokenId> rstrip_ids_;   // sorted: raw added tokens with rstrip
  std::size_t added_lookahead_ = 4;
  std::vector<bool> byte_level_;
  // With a ByteLevel decoder: by id, the bytes each token decodes to.
  std::vector<std::string> decode_bytes_;
  std::size_t id_limit_ = 0;
  std::uint64_t identity_ = 0;
  std::string name_;
};

}  // namespace prefixgate::canon::internal
