// json::parse's checks on raw text and the wording of its errors (json_parse_text.h).
#include "json_parse_text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <system_error>

#include "prefixgate/base/hex_digit.h"

namespace prefixgate::json::parse_text_detail {

// Keys shown in error messages are cut to this many bytes (on a code point boundary).
constexpr std::size_t kMaxKeyInMessage = 64;

bool is_json_whitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim_trailing_whitespace(std::string_view s) {
  while (!s.empty() && is_json_whitespace(s.back())) s.remove_suffix(1);
  return s;
}

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

// RFC 8259 section 6: number = [ minus ] int [ frac ] [ exp ], int = zero / ( digit1-9 *DIGIT ).
bool is_json_number(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  return i == n;
}

// For a grammatical number that std::from_chars found out of range: whether it is too large
// (rather than too small). Out-of-range values have a decimal exponent beyond +-300, so the
// sign of a saturating estimate of it is reliable.
bool number_overflows(std::string_view s) {
  std::size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
  std::int64_t int_digits = 0;  // significant digits before the point
  std::int64_t leading_fraction_zeros = 0;
  bool seen_nonzero = false;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    if (s[i] != '0') seen_nonzero = true;
    if (seen_nonzero) ++int_digits;
  }
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && is_digit(s[i]); ++i) {
      if (!seen_nonzero && s[i] == '0') ++leading_fraction_zeros;
      if (s[i] != '0') seen_nonzero = true;
    }
  }
  std::int64_t exponent = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool negative = false;
    if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
    for (; i < s.size(); ++i)
      exponent = std::min<std::int64_t>(exponent * 10 + (s[i] - '0'), 1'000'000);
    if (negative) exponent = -exponent;
  }
  // The value is about 10^(int_digits - 1 + exponent), or 10^(exponent - zeros - 1) when < 1.
  const std::int64_t magnitude =
      int_digits > 0 ? int_digits - 1 + exponent : exponent - leading_fraction_zeros - 1;
  return magnitude > 0;
}

// Offset of the first byte that is not part of well-formed UTF-8 (Unicode 15, table 3-7), or
// s.size(). Only used to say where simdjson's UTF8_ERROR is.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
      if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      const auto bk = static_cast<unsigned char>(s[i + k]);
      if (bk < 0x80 || bk > 0xBF) return i;
    }
    i += len;
  }
  return s.size();
}

// Offset of the first control character that JSON requires escaped (RFC 8259 section 7: inside
// a string, U+0000..U+001F; outside, anything but the four whitespace bytes). Only used to say
// where simdjson's UNESCAPED_CHARS is.
std::size_t first_unescaped_control(std::string_view s) {
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      } else if (c < 0x20) {
        return i;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c < 0x20 && !is_json_whitespace(static_cast<char>(c))) {
      return i;
    }
  }
  return s.size();
}

namespace {

// The code unit of a `\uXXXX` escape starting at s[i] (the backslash), or -1.
int unicode_escape_at(std::string_view s, std::size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u') return -1;
  int unit = 0;
  for (std::size_t k = i + 2; k < i + 6; ++k) {
    const int h = hex_digit(s[k]);
    if (h < 0) return -1;
    unit = unit * 16 + h;
  }
  return unit;
}

}  // namespace

// Why simdjson rejected a string, whose body (after the opening quote) starts at `body`.
// Returns the offset within `body` of a lone surrogate escape and sets *lone_surrogate, or the
// offset of the first invalid escape. `body` runs to the end of the input; the closing quote
// ends the scan.
std::size_t classify_string_error(std::string_view body, bool* lone_surrogate) {
  *lone_surrogate = false;
  for (std::size_t i = 0; i < body.size() && body[i] != '"'; ++i) {
    if (body[i] != '\\') continue;
    if (i + 1 >= body.size()) return i;
    const char e = body[i + 1];
    if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
        e == 't') {
      ++i;
      continue;
    }
    const int unit = unicode_escape_at(body, i);
    if (unit < 0) return i;
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      // RFC 8259 section 7: a high surrogate must be followed by an escaped low surrogate.
      const int next = unicode_escape_at(body, i + 6);
      if (next < 0xDC00 || next > 0xDFFF) {
        *lone_surrogate = true;
        return i;
      }
      i += 11;
    } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
      *lone_surrogate = true;
      return i;
    } else {
      i += 5;
    }
  }
  return 0;  // simdjson and this scan disagree; point at the string itself
}

// A key for an error message: quoted, cut at kMaxKeyInMessage bytes on a code point boundary.
std::string describe_key(std::string_view key) {
  std::string out = "\"";
  if (key.size() <= kMaxKeyInMessage) {
    out += key;
  } else {
    std::size_t cut = kMaxKeyInMessage;
    while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
    out += key.substr(0, cut);
    out += "...";
  }
  out += '"';
  return out;
}

// "invalid number (at byte 12)": what is wrong, then where.
std::string located(std::string_view what, std::size_t offset, std::size_t input_size) {
  std::string message(what);
  if (offset < input_size) {
    message += " (at byte " + std::to_string(offset) + ")";
  } else {
    message += " (at end of input)";
  }
  return message;
}

const char* describe_simdjson_error(simdjson::error_code code) {
  switch (code) {
    case simdjson::EMPTY: return "no JSON value (empty or only whitespace)";
    case simdjson::TAPE_ERROR:
      return "unexpected character, or a missing or misplaced comma, colon or bracket";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      return "unbalanced brackets, or content after the JSON value";
    case simdjson::UNCLOSED_STRING: return "unterminated string";
    case simdjson::STRING_ERROR: return "invalid escape sequence in string";
    case simdjson::UNESCAPED_CHARS: return "control character not allowed here (escape it)";
    case simdjson::TRAILING_CONTENT: return "content after the JSON value";
    case simdjson::INCORRECT_TYPE: return "expected a value";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR: return "invalid literal (expected true, false or null)";
    case simdjson::NUMBER_ERROR: return "invalid number";
    default: return simdjson::error_message(code);
  }
}

namespace {

// A count (up to 15 digits, no sign, fraction, exponent or leading zero), which a double holds
// exactly: most numbers a request or an answer carries (ids, token counts, timestamps, indexes),
// read without from_chars. False for anything else, which the full reading takes.
bool read_small_integer(std::string_view token, double& value) {
  if (token.empty() || token.size() > 15 || (token[0] == '0' && token.size() > 1)) return false;
  std::uint64_t n = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  value = static_cast<double>(n);
  return true;
}

}  // namespace

NumberRead read_number(std::string_view token, double& value) {
  if (read_small_integer(token, value)) return NumberRead::kOk;
  if (!is_json_number(token)) return NumberRead::kInvalid;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range) {
    if (number_overflows(token)) return NumberRead::kTooLarge;
    value = token[0] == '-' ? -0.0 : 0.0;
    return NumberRead::kOk;
  }
  if (ec != std::errc() || end != token.data() + token.size()) return NumberRead::kInvalid;
  return NumberRead::kOk;
}

std::optional<Value> read_literal(std::string_view token) {
  if (token == "true") return Value(true);
  if (token == "false") return Value(false);
  if (token == "null") return Value();
  return std::nullopt;
}

std::optional<std::string> decode_string_literal(std::string_view quoted) {
  auto value = parse(quoted);
  if (!value || !value->is_string()) return std::nullopt;
  return std::move(value->as_string());
}

simdjson::padded_string_view padded_in(std::string& buffer, std::string_view text) {
  buffer.assign(text);
  buffer.append(simdjson::SIMDJSON_PADDING, '\0');
  return simdjson::padded_string_view(buffer.data(), text.size(), buffer.size());
}

}  // namespace prefixgate::json::parse_text_detail
