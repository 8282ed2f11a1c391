// Finding added tokens ("<|eot_id|>", "<think>") in text before anything else looks at it, as
// Hugging Face tokenizers do: the leftmost match wins, and of the matches starting there the
// longest. Special tokens are matched only when the caller asks for them (EncodeOptions::
// parse_special); non-special added tokens are part of the vocabulary and always matched, as
// Hugging Face does with split_special_tokens=True.
//
//   AddedTokenMatcher matcher(tokens);
//   for (auto m = matcher.find(text, 0, true); m; m = matcher.find(text, m->end, true)) ...
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon::internal {

struct AddedToken {
  std::string content;  // non-empty
  TokenId id = 0;
  bool special = false;
  bool lstrip = false;  // the match also takes the whitespace before it
  bool rstrip = false;  // the match also takes the whitespace after it
};

class AddedTokenMatcher {
 public:
  struct Match {
    std::size_t begin;  // including whitespace taken by lstrip
    std::size_t end;    // including whitespace taken by rstrip
    const AddedToken* token;
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // The first match in text[pos, end of text), or none. lstrip never reaches before `pos`.
  std::optional<Match> find(std::string_view text, std::size_t pos, bool include_special) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::uint32_t>> children;
    std::int32_t token = -1;  // index into tokens_ of the token ending here
  };
  // The longest token (of the allowed kinds) that text[begin...] starts with.
  const AddedToken* longest_at(std::string_view text, std::size_t begin,
                               bool include_special) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;  // trie_[0] is the root
  std::bitset<256> first_bytes_;
  int single_first_byte_ = -1;  // when every token starts with the same byte: memchr for it
};

}  // namespace prefixgate::canon::internal
