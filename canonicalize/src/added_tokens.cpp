#include "added_tokens.h"

#include <cstring>

#include "char_class.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

// Whitespace for lstrip/rstrip is Rust's char::is_whitespace (Unicode White_Space), which
// Hugging Face tokenizers uses; all of it lies in the BMP.
bool is_white_space_cp(char32_t cp) {
  return cp < 0x10000 && is_white_space(bmp_char_classes()[cp]);
}

std::size_t skip_white_space_forward(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    const DecodedCodePoint d = decode_utf8(text, pos);
    if (!is_white_space_cp(d.cp)) break;
    pos += d.bytes;
  }
  return pos;
}

std::size_t skip_white_space_backward(std::string_view text, std::size_t pos, std::size_t limit) {
  while (pos > limit) {
    std::size_t start = pos - 1;
    while (start > limit && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const DecodedCodePoint d = decode_utf8(text, start);
    if (start + d.bytes != pos || !is_white_space_cp(d.cp)) break;
    pos = start;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), trie_(1) {
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    std::uint32_t node = 0;
    for (char ch : tokens_[t].content) {
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
    first_bytes_.set(static_cast<unsigned char>(tokens_[t].content[0]));
  }
  if (first_bytes_.count() == 1) {
    for (int b = 0; b < 256; ++b) {
      if (first_bytes_.test(static_cast<std::size_t>(b))) single_first_byte_ = b;
    }
  }
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view text, std::size_t begin,
                                                bool include_special) const {
  const AddedToken* best = nullptr;
  std::uint32_t node = 0;
  for (std::size_t i = begin; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::uint32_t next = 0;
    for (const auto& [b, child] : trie_[node].children) {
      if (b == byte) next = child;
    }
    if (next == 0) break;
    node = next;
    const std::int32_t t = trie_[node].token;
    if (t >= 0 && (include_special || !tokens_[static_cast<std::size_t>(t)].special)) {
      best = &tokens_[static_cast<std::size_t>(t)];
    }
  }
  return best;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text,
                                                                std::size_t pos,
                                                                bool include_special) const {
  if (tokens_.empty()) return std::nullopt;
  for (std::size_t i = pos; i < text.size(); ++i) {
    if (single_first_byte_ >= 0) {
      const void* hit = std::memchr(text.data() + i, single_first_byte_, text.size() - i);
      if (hit == nullptr) return std::nullopt;
      i = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    } else if (!first_bytes_.test(static_cast<unsigned char>(text[i]))) {
      continue;
    }
    if (const AddedToken* token = longest_at(text, i, include_special)) {
      Match m{i, i + token->content.size(), token};
      if (token->lstrip) m.begin = skip_white_space_backward(text, m.begin, pos);
      if (token->rstrip) m.end = skip_white_space_forward(text, m.end);
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace prefixgate::canon::internal
