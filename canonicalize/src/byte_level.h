// GPT-2's byte-to-unicode table, which byte-level BPE vocabularies are written in: every byte
// gets a printable code point so that a token is a readable string ("Ġthe" is " the").
// Bytes that are printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
// themselves; the other 68 map, in byte order, to U+0100, U+0101, ...
#pragma once

#include <array>
#include <cstdint>

namespace prefixgate::canon::internal {

inline constexpr std::array<char32_t, 256> kByteToUnicode = [] {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}();

// The byte a code point of the table stands for, or -1.
inline int unicode_to_byte(char32_t cp) {
  static constexpr std::array<std::int16_t, 0x144> kInverse = [] {
    std::array<std::int16_t, 0x144> inverse{};
    inverse.fill(-1);
    for (int b = 0; b < 256; ++b) inverse[kByteToUnicode[b]] = static_cast<std::int16_t>(b);
    return inverse;
  }();
  return cp < kInverse.size() ? kInverse[cp] : -1;
}

}  // namespace prefixgate::canon::internal
