// Python's view of a str, on UTF-8 bytes: code point counting and indexing (len(), s[i], slices
// count code points, not bytes), str.isspace()/strip() whitespace, and case mapping.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "utf8_decode.h"

namespace prefixgate::canon::jinja {

using internal::append_utf8;
using internal::decode_utf8;

// str.isspace() for one code point: what split() and strip() with no argument remove. Python's
// set (bidi class WS, B or S, or category Zs) includes U+001C..U+001F and U+0085, which
// JavaScript's trim() does not, and excludes U+FEFF, which JavaScript's includes.
bool py_isspace(char32_t cp);

std::size_t cp_count(std::string_view s);
// Byte offset of code point `index` (s.size() when index >= the count).
std::size_t cp_offset(std::string_view s, std::size_t index);

// Simple (one-to-one) Unicode case mappings, by utf8proc. Python's str.upper() uses the full
// mappings, which differ for a few characters ('ß'.upper() is 'SS'); those are mapped here too.
void append_upper(char32_t cp, std::string& out);
void append_lower(char32_t cp, std::string& out);
void append_title(char32_t cp, std::string& out);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

bool py_isalpha(char32_t cp);
bool py_isdigit(char32_t cp);
bool py_isalnum(char32_t cp);
bool py_iscased_lower(char32_t cp);
bool py_iscased_upper(char32_t cp);

}  // namespace prefixgate::canon::jinja
