// Finding added tokens ("<|eot_id|>", "<think>") in text before anything else looks at it, as
// Hugging Face tokenizers' AddedVocabulary::find_matches does:
//   - the tokens are searched for together, leftmost first and of those the longest, without
//     overlap (an Aho-Corasick LeftmostLongest iteration);
//   - a match is then dropped, and the search goes on after it, when it is a special token and
//     special tokens are not being parsed (EncodeOptions::parse_special = false, Hugging Face's
//     encode_special_tokens), or when the token is single_word and a word character touches it;
//   - lstrip takes the whitespace before the match (never reaching into the previous match),
//     rstrip the whitespace after it.
// A tokenizer has two matchers: one over the raw text for tokens with normalized=false, one
// over each normalized stretch of text for tokens with normalized=true (whose contents are
// normalized the same way).
//
//   AddedTokenMatcher::Cursor c;
//   while (auto m = matcher.next(text, c, /*parse_special=*/true)) { ... c.emitted_end = m->end; }
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
  bool lstrip = false;       // the match also takes the whitespace before it
  bool rstrip = false;       // the match also takes the whitespace after it
  bool single_word = false;  // matches only when no word character touches it
  bool normalized = false;   // matched in normalized text (by its normalized content)
};

class AddedTokenMatcher {
 public:
  struct Match {
    std::size_t begin;  // including whitespace taken by lstrip
    std::size_t end;    // including whitespace taken by rstrip
    const AddedToken* token;
  };
  // Where a search over one text stands.
  struct Cursor {
    std::size_t scan = 0;         // where the next candidate is looked for
    std::size_t emitted_end = 0;  // end of the last match returned (lstrip stops there)
  };

  AddedTokenMatcher() = default;
  // `patterns[i]` is what is searched for token i (its content, or its normalized content);
  // empty: the content.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens,
                             std::vector<std::string> patterns = {});

  // The next match in `text` from the cursor, or none; advances cursor.scan.
  std::optional<Match> next(std::string_view text, Cursor& cursor, bool parse_special) const;

  // The first match in text[pos, end of text), or none. lstrip never reaches before `pos`.
  std::optional<Match> find(std::string_view text, std::size_t pos, bool include_special) const {
    Cursor c{pos, pos};
    return next(text, c, include_special);
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::uint32_t>> children;
    std::int32_t token = -1;  // index into tokens_ of the token ending here
    // A run of nodes below this one that each have one child and end no token, compared with
    // one memcmp instead of a node at a time: `chain` holds their bytes, `chain_end` is the node
    // the last byte reaches. Empty when this node has other than one child.
    std::string chain;
    std::uint32_t chain_end = 0;
  };
  // The longest pattern that text[begin...] starts with: its token index and length.
  std::optional<std::pair<std::size_t, std::size_t>> longest_at(std::string_view text,
                                                                std::size_t begin) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;  // trie_[0] is the root
  std::bitset<256> first_bytes_;
  int single_first_byte_ = -1;  // when every pattern starts with the same byte: memchr for it
};

}  // namespace prefixgate::canon::internal
