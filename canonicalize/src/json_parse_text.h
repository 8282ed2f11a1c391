// json::parse's checks on raw text and the wording of its errors: what simdjson does not check
// (the number grammar and literals, where its errors are), the messages that say what is wrong
// and where, and how a text is handed to simdjson. Private to the JSON reader's files
// (json_parse.cpp, json_visit_fields.cpp, json_parse_text.cpp).
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json::parse_text_detail {

bool is_json_whitespace(char c);

std::string_view trim_trailing_whitespace(std::string_view s);

// RFC 8259 section 6: number = [ minus ] int [ frac ] [ exp ], int = zero / ( digit1-9 *DIGIT ).
bool is_json_number(std::string_view s);

// For a grammatical number that std::from_chars found out of range: whether it is too large
// (rather than too small). Out-of-range values have a decimal exponent beyond +-300, so the
// sign of a saturating estimate of it is reliable.
bool number_overflows(std::string_view s);

// Offset of the first byte that is not part of well-formed UTF-8 (Unicode 15, table 3-7), or
// s.size(). Only used to say where simdjson's UTF8_ERROR is.
std::size_t first_invalid_utf8(std::string_view s);

// Offset of the first control character that JSON requires escaped (RFC 8259 section 7: inside
// a string, U+0000..U+001F; outside, anything but the four whitespace bytes). Only used to say
// where simdjson's UNESCAPED_CHARS is.
std::size_t first_unescaped_control(std::string_view s);

// Why simdjson rejected a string, whose body (after the opening quote) starts at `body`.
// Returns the offset within `body` of a lone surrogate escape and sets *lone_surrogate, or the
// offset of the first invalid escape. `body` runs to the end of the input; the closing quote
// ends the scan.
std::size_t classify_string_error(std::string_view body, bool* lone_surrogate);

// A key for an error message: quoted, cut at kMaxKeyInMessage bytes on a code point boundary.
std::string describe_key(std::string_view key);

// "invalid number (at byte 12)": what is wrong, then where.
std::string located(std::string_view what, std::size_t offset, std::size_t input_size);

const char* describe_simdjson_error(simdjson::error_code code);

// Documents up to this size reuse a per-thread parser (simdjson's advice: reuse parsers, their
// buffers are sized to the largest input seen). Larger ones get a parser of their own, so a
// thread does not keep tens of MiB of index buffers alive after one big request.
inline constexpr std::size_t kReusableParserBytes = std::size_t{1} << 20;

// `text` copied into `buffer` with the SIMDJSON_PADDING bytes On Demand reads past the end.
simdjson::padded_string_view padded_in(std::string& buffer, std::string_view text);

enum class NumberRead { kOk, kInvalid, kTooLarge };

// A number token's value, checked against RFC 8259's grammar (section 6) first. from_chars is
// locale-independent and correctly rounded, and unlike simdjson's get_double() keeps no limit
// on digits; it takes a leading '-' but the grammar allows no '+'. Too small a number rounds to
// zero, as in ECMAScript; too large a one is kTooLarge.
NumberRead read_number(std::string_view token, double& value);

// A literal token's value (true, false or null, checked on the raw token: simdjson's type()
// looks at its first byte only); nullopt for anything else.
std::optional<Value> read_literal(std::string_view token);

// A string literal's value, its quotes included in `quoted`, decoded by parse() itself (escapes,
// surrogate pairs, control characters); nullopt where parse() refuses it. For the tree-free
// readers' rare strings with escapes they do not undo themselves.
std::optional<std::string> decode_string_literal(std::string_view quoted);

}  // namespace prefixgate::json::parse_text_detail
