// The BPE model of a byte-level tokenizer: turns one pre-token (raw bytes) into token ids by
// applying merges in rank order, as Hugging Face tokenizers' `BPE` does.
//
// Every byte starts as its own symbol (the vocabulary has a token for each of the 256 bytes);
// then, repeatedly, the adjacent pair with the lowest merge rank (leftmost on ties) is merged.
// With `ignore_merges` (Llama-3), a pre-token that is itself in the vocabulary is emitted whole.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bpe_tables.h"
#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

struct BpeMergeSpec {
  TokenId left;
  TokenId right;
  TokenId merged;
};

struct BpeModelSpec {
  // Indexed by id: the token's raw bytes, whether the id is in the vocabulary at all, and
  // whether the token was written in the byte-level alphabet (only those can be reached from
  // text; any other is kept for decoding).
  std::vector<std::string> tokens;
  std::vector<bool> present;
  std::vector<bool> byte_level;
  std::vector<BpeMergeSpec> merges;  // in rank order
  bool ignore_merges = false;
};

// Reused between pre-tokens of one encode() call, so BPE allocates nothing per word.
struct BpeScratch {
  struct Symbol {
    TokenId id;
    std::int32_t prev;
    std::int32_t next;
  };
  struct Candidate {
    std::uint32_t rank;
    std::uint32_t pos;  // index of the left symbol
    TokenId left;       // the pair as it was when queued; a changed pair means a stale entry
    TokenId right;
    TokenId merged;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  // Errors: kInvalidValue when a byte has no token.
  static Result<BpeModel> create(BpeModelSpec spec);

  // Appends the ids of `word` (non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;

  // The bytes of token `id` ("" for an id outside the vocabulary).
  std::string_view token_bytes(TokenId id) const {
    return id < tokens_.size() ? tokens_[id] : std::string_view{};
  }
  bool has_token(TokenId id) const { return id < present_.size() && present_[id]; }
  // One past the largest id in the vocabulary.
  std::size_t id_limit() const { return tokens_.size(); }
  std::size_t merge_count() const { return merges_.size(); }

  BpeModel(BpeModel&&) = default;
  BpeModel& operator=(BpeModel&&) = default;

 private:
  BpeModel() = default;

  void merge(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;
  void merge_short(std::string_view word, std::vector<TokenId>& out) const;

  std::vector<char> arena_;               // all token bytes, back to back (a vector, so
                                          // moving the model keeps tokens_ valid)
  std::vector<std::string_view> tokens_;  // by id, into arena_
  std::vector<bool> present_;
  TokenLookup lookup_;  // byte-level tokens by bytes
  MergeTable merges_;
  std::array<TokenId, 256> byte_ids_{};
  bool ignore_merges_ = false;
};

}  // namespace prefixgate::canon::internal
