// Decoding one code point of UTF-8, for the tokenizers' scanners.
//
// Tokenizer input is whatever a client sent, so a malformed sequence is not an error here: each
// byte of it decodes as its own one-byte "code point" kInvalidCodePoint, which every scanner
// treats as an ordinary symbol (byte-level BPE can still encode the raw byte).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace prefixgate::canon::internal {

// Not a Unicode scalar value, so it never matches a Unicode property.
inline constexpr char32_t kInvalidCodePoint = 0x110000;

struct DecodedCodePoint {
  char32_t cp;
  std::uint32_t bytes;  // 1..4
};

// Decodes the code point starting at text[pos]; pos < text.size().
inline DecodedCodePoint decode_utf8(std::string_view text, std::size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const std::size_t left = text.size() - pos;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](std::size_t i) { return i < left && (s[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) return {static_cast<char32_t>(((b0 & 0x1F) << 6) | (s[1] & 0x3F)), 2};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (cont(1) && cont(2)) {
      const char32_t cp = ((b0 & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
      // Overlong forms and UTF-16 surrogates are not UTF-8 (RFC 3629 section 4).
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (cont(1) && cont(2) && cont(3)) {
      const char32_t cp =
          ((b0 & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
  }
  return {kInvalidCodePoint, 1};
}

// Appends the UTF-8 form of a Unicode scalar value.
inline void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace prefixgate::canon::internal
