#include "added_tokens.h"

#include <cstring>

#include "char_class.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

// Whitespace for lstrip/rstrip is Rust's char::is_whitespace (Unicode White_Space), which
// Hugging Face tokenizers uses.
std::size_t skip_white_space_forward(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    const DecodedCodePoint d = decode_utf8(text, pos);
    if (!is_white_space_code_point(d.cp)) break;
    pos += d.bytes;
  }
  return pos;
}

// The start of the code point that ends at `pos` (> limit), or nullopt for a malformed one.
std::optional<std::size_t> code_point_before(std::string_view text, std::size_t pos,
                                             std::size_t limit, DecodedCodePoint& d) {
  std::size_t start = pos - 1;
  while (start > limit && pos - start < 4 &&
         (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  d = decode_utf8(text, start);
  if (start + d.bytes != pos) {
    d = decode_utf8(text, pos - 1);
    return pos - 1;
  }
  return start;
}

std::size_t skip_white_space_backward(std::string_view text, std::size_t pos, std::size_t limit) {
  while (pos > limit) {
    DecodedCodePoint d{};
    const std::size_t start = *code_point_before(text, pos, limit, d);
    if (!is_white_space_code_point(d.cp)) break;
    pos = start;
  }
  return pos;
}

// The regex crate's Unicode \w, which single_word tests with: Alphabetic, Mark, Decimal_Number,
// Connector_Punctuation, Join_Control. Alphabetic is taken as the letters, letter numbers and
// the few symbols that are Other_Alphabetic (circled and squared Latin letters).
bool is_word_character(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  const std::uint8_t cat = general_category(cp);
  return (cat >= 1 && cat <= 8) || cat == 9 || cat == 10 || cat == 12;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), trie_(1) {
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& pattern =
        t < patterns.size() && !patterns[t].empty() ? patterns[t] : tokens_[t].content;
    std::uint32_t node = 0;
    for (char ch : pattern) {
      const auto byte = static_cast<unsigned char>(ch);
      std::uint32_t next = 0;
      for (const auto& [b, child] : trie_[node].children) {
        if (b == byte) next = child;
      }
      if (next == 0) {
        next = static_cast<std::uint32_t>(trie_.size());
        trie_[node].children.emplace_back(byte, next);
        trie_.emplace_back();
      }
      node = next;
    }
    // A later duplicate replaces an earlier one, as in a map keyed by content.
    trie_[node].token = static_cast<std::int32_t>(t);
    first_bytes_.set(static_cast<unsigned char>(pattern[0]));
  }
  for (Node& n : trie_) {
    if (n.children.size() != 1) continue;
    std::uint32_t at = n.children[0].second;
    n.chain.push_back(static_cast<char>(n.children[0].first));
    while (trie_[at].token < 0 && trie_[at].children.size() == 1) {
      n.chain.push_back(static_cast<char>(trie_[at].children[0].first));
      at = trie_[at].children[0].second;
    }
    n.chain_end = at;
  }
  if (first_bytes_.count() == 1) {
    for (int b = 0; b < 256; ++b) {
      if (first_bytes_.test(static_cast<std::size_t>(b))) single_first_byte_ = b;
    }
  }
}

std::optional<std::pair<std::size_t, std::size_t>> AddedTokenMatcher::longest_at(
    std::string_view text, std::size_t begin) const {
  std::optional<std::pair<std::size_t, std::size_t>> best;
  std::uint32_t node = 0;
  std::size_t i = begin;
  while (i < text.size()) {
    const Node& n = trie_[node];
    if (!n.chain.empty()) {
      // No token ends inside the chain, so a partial match of it adds nothing.
      if (text.size() - i < n.chain.size() ||
          std::memcmp(text.data() + i, n.chain.data(), n.chain.size()) != 0) {
        break;
      }
      i += n.chain.size();
      node = n.chain_end;
    } else {
      const auto byte = static_cast<unsigned char>(text[i]);
      std::uint32_t next = 0;
      for (const auto& [b, child] : n.children) {
        if (b == byte) {
          next = child;
          break;
        }
      }
      if (next == 0) break;
      ++i;
      node = next;
    }
    if (trie_[node].token >= 0) {
      best = std::pair{static_cast<std::size_t>(trie_[node].token), i - begin};
    }
  }
  return best;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::next(std::string_view text,
                                                                Cursor& cursor,
                                                                bool parse_special) const {
  if (tokens_.empty()) return std::nullopt;
  for (std::size_t i = cursor.scan; i < text.size(); ++i) {
    if (single_first_byte_ >= 0) {
      const void* hit = std::memchr(text.data() + i, single_first_byte_, text.size() - i);
      if (hit == nullptr) break;
      i = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    } else if (!first_bytes_.test(static_cast<unsigned char>(text[i]))) {
      continue;
    }
    const auto found = longest_at(text, i);
    if (!found) continue;
    const AddedToken& token = tokens_[found->first];
    std::size_t begin = i;
    std::size_t end = i + found->second;
    // The search goes on after this match whether or not it is kept.
    cursor.scan = end;
    i = end - 1;
    if (token.special && !parse_special) continue;
    if (token.single_word) {
      DecodedCodePoint before{}, after{};
      const bool word_before =
          begin > 0 && (code_point_before(text, begin, 0, before), is_word_character(before.cp));
      const bool word_after =
          end < text.size() && (after = decode_utf8(text, end), is_word_character(after.cp));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      begin = std::max(skip_white_space_backward(text, begin, 0), cursor.emitted_end);
    }
    if (token.rstrip) end = skip_white_space_forward(text, end);
    begin = std::max(begin, cursor.emitted_end);
    return Match{begin, end, &token};
  }
  cursor.scan = text.size();
  return std::nullopt;
}

}  // namespace prefixgate::canon::internal
