// The BPE model: turns one pre-token into token ids by applying merges in rank order, as Hugging
// Face tokenizers' `BPE` does. Two alphabets:
//   - bytes (byte-level BPE: Llama 3, Qwen, DeepSeek, GPT-OSS, Tekken): every byte of the word
//     starts as its own symbol; the vocabulary has a token for each of the 256 bytes. (Hugging
//     Face maps the bytes to printable characters first; we keep the bytes and translate the
//     vocabulary instead.)
//   - characters (SentencePiece-style BPE: Llama 2, Mistral 7B, Gemma): every code point starts
//     as its own symbol, looked up in the vocabulary; one that is not there becomes its UTF-8
//     bytes as <0xNN> tokens (byte_fallback), else the unknown token (consecutive ones fused
//     into one with fuse_unk), else nothing, in that order, as Hugging Face does.
// Then, repeatedly, the adjacent pair with the lowest merge rank (leftmost on ties) is merged.
// With `ignore_merges` (Llama 3), a word that is itself in the vocabulary is emitted whole.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpe_tables.h"
#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

enum class BpeAlphabet { kBytes, kChars };

struct BpeMergeSpec {
  TokenId left;
  TokenId right;
  TokenId merged;
};

struct BpeModelSpec {
  BpeAlphabet alphabet = BpeAlphabet::kBytes;
  // Indexed by id: the token's bytes as the model matches them (kBytes: the raw bytes a
  // byte-level entry stands for; kChars: the entry's text), and whether the id is in the
  // vocabulary at all. kBytes only: whether the entry was written in the byte-level alphabet
  // (only those can be reached from text; any other is kept for decoding).
  std::vector<std::string> tokens;
  std::vector<bool> present;
  std::vector<bool> byte_level;
  std::vector<BpeMergeSpec> merges;  // in rank order
  bool ignore_merges = false;
  bool byte_fallback = false;      // kChars only
  std::optional<TokenId> unknown;  // kChars only
  bool fuse_unknown = false;
};

class WordCache;

// Reused between pre-tokens of one encode() call, so BPE allocates nothing per word.
struct BpeScratch {
  struct Symbol {
    TokenId id;
    std::uint32_t bytes;  // how many bytes of the word it covers
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
  // Where encode_word looks a word up before merging it, and keeps what it merged (without
  // `lengths` only); null: every word merged.
  WordCache* words = nullptr;
};

class BpeModel {
 public:
  // Errors: kInvalidValue when a byte-level vocabulary lacks a byte.
  static Result<BpeModel> create(BpeModelSpec spec);

  // Appends the ids of `word` (non-empty) to `out`; with `lengths`, also how many bytes of
  // `word` each of them covers (they add up to word.size(), less characters dropped for want
  // of an unknown token).
  void encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch,
                   std::vector<std::uint32_t>* lengths = nullptr) const;

  // The bytes of token `id` as the model matches them ("" for an id outside the vocabulary).
  std::string_view token_bytes(TokenId id) const {
    return id < tokens_.size() ? tokens_[id] : std::string_view{};
  }
  bool has_token(TokenId id) const { return id < present_.size() && present_[id]; }
  // The id of the vocabulary entry with exactly these bytes (as the model matches them).
  std::optional<TokenId> find(std::string_view bytes) const { return lookup_.find(bytes); }
  // One past the largest id in the vocabulary.
  std::size_t id_limit() const { return tokens_.size(); }
  std::size_t merge_count() const { return merges_.size(); }
  BpeAlphabet alphabet() const { return alphabet_; }

  BpeModel(BpeModel&&) = default;
  BpeModel& operator=(BpeModel&&) = default;

 private:
  BpeModel() = default;

  // The initial symbols of a kChars word, into scratch.symbols.
  void char_symbols(std::string_view word, BpeScratch& scratch) const;
  void encode_chars(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch,
                    std::vector<std::uint32_t>* lengths) const;
  // Merges a kBytes word of more than one byte.
  void encode_bytes_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch,
                         std::vector<std::uint32_t>* lengths) const;
  // Whether no token can span word[pos] (a space marker) and what precedes it.
  bool can_cut_before_marker(std::string_view word, std::size_t pos) const;
  template <bool kLengths>
  void merge_short(std::string_view word, std::vector<TokenId>& out,
                   std::vector<std::uint32_t>* lengths) const;
  void merge(std::vector<TokenId>& out, BpeScratch& scratch,
             std::vector<std::uint32_t>* lengths) const;

  std::vector<char> arena_;               // all token bytes, back to back (a vector, so
                                          // moving the model keeps tokens_ valid)
  std::vector<std::string_view> tokens_;  // by id, into arena_
  std::vector<bool> present_;
  TokenLookup lookup_;  // reachable tokens by bytes
  MergeTable merges_;
  BpeAlphabet alphabet_ = BpeAlphabet::kBytes;
  // kBytes: the token of each byte. kChars: the token of each ASCII character, when the
  // vocabulary has one (kNoToken otherwise), and the <0xNN> tokens for byte_fallback.
  std::array<TokenId, 256> byte_ids_{};
  std::array<TokenId, 256> fallback_ids_{};
  bool byte_fallback_ = false;
  std::optional<TokenId> unknown_;
  bool fuse_unknown_ = false;
  bool ignore_merges_ = false;
  // kChars: "▁" when the vocabulary has it, and the characters some token has right before it
  // (a word is never cut between those and the marker).
  std::string space_marker_;
  std::vector<std::string> joins_marker_;
};

}  // namespace prefixgate::canon::internal
