// A hexadecimal digit's value, in either case: for the readers of hex text (JSON's \u escapes,
// HTTP chunk sizes, percent-encoded form values).
//
//   int d = hex_digit(c);
//   if (d < 0) return bad_input();   // not a hex digit
//   value = value << 4 | d;
#pragma once

namespace prefixgate {

// 0-15 for '0'-'9', 'a'-'f' and 'A'-'F'; -1 for any other byte.
constexpr int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace prefixgate
