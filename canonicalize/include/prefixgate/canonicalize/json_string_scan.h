// Eight bytes of a JSON string at a time (SWAR: a byte below 0x20 or equal to a given value sets
// its high bit in the masks below; borrows can only flag bytes after a true hit, so a false
// result is exact). For loops that skip the plain runs of a string and look byte by byte only
// where one of these words says so.
//
//   while (i + 8 <= s.size() && !json::word_needs_escape(s.data() + i)) i += 8;
#pragma once

#include <cstdint>
#include <cstring>

namespace prefixgate::json {

inline std::uint64_t load_word(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Whether any of the 8 bytes at `p` is a control character, '"' or '\\': what a JSON string
// cannot hold as it is.
inline bool word_needs_escape(const char* p) {
  const std::uint64_t v = load_word(p);
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  const auto has_zero = [](std::uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  const std::uint64_t below_space = (v - kOnes * 0x20) & ~v & kHigh;
  return (below_space | has_zero(v ^ (kOnes * '"')) | has_zero(v ^ (kOnes * '\\'))) != 0;
}

// Whether the 8 bytes at `p` are printable ASCII or DEL other than '"' and '\\': a run a JSON
// string holds as it is, with nothing to decode.
inline bool word_is_plain_ascii(const char* p) {
  return (load_word(p) & 0x8080808080808080ull) == 0 && !word_needs_escape(p);
}

}  // namespace prefixgate::json
