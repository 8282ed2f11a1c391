#include "jinja_unicode.h"

#include <utf8proc.h>

namespace prefixgate::canon::jinja {

bool py_isspace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::size_t cp_count(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::size_t cp_offset(std::string_view s, std::size_t index) {
  std::size_t pos = 0;
  for (; pos < s.size() && index > 0; --index) pos += decode_utf8(s, pos).bytes;
  return pos;
}

namespace {

utf8proc_int32_t as_utf8proc(char32_t cp) {
  return static_cast<utf8proc_int32_t>(cp);
}

// The few code points whose full case mapping is more than one code point and which turn up in
// text (German, Turkish, ligatures); Python applies these.
bool special_upper(char32_t cp, std::string& out) {
  switch (cp) {
    case 0xDF: out += "SS"; return true;          // ß
    case 0xFB00: out += "FF"; return true;        // ﬀ
    case 0xFB01: out += "FI"; return true;        // ﬁ
    case 0xFB02: out += "FL"; return true;        // ﬂ
    case 0x149: out += "\xCA\xBCN"; return true;  // ŉ
    default: return false;
  }
}

}  // namespace

void append_upper(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
    return;
  }
  if (cp > 0x10FFFF || special_upper(cp, out)) {
    if (cp > 0x10FFFF) append_utf8(0xFFFD, out);
    return;
  }
  append_utf8(static_cast<char32_t>(utf8proc_toupper(as_utf8proc(cp))), out);
}

void append_lower(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  if (cp == 0x130) {  // İ lowers to i + combining dot above
    out += "i\xCC\x87";
    return;
  }
  if (cp > 0x10FFFF) {
    append_utf8(0xFFFD, out);
    return;
  }
  append_utf8(static_cast<char32_t>(utf8proc_tolower(as_utf8proc(cp))), out);
}

void append_title(char32_t cp, std::string& out) {
  if (cp < 0x80 || cp > 0x10FFFF) {
    append_upper(cp, out);
    return;
  }
  if (cp == 0xDF) {
    out += "Ss";
    return;
  }
  append_utf8(static_cast<char32_t>(utf8proc_totitle(as_utf8proc(cp))), out);
}

namespace {

template <class F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    if (d.cp == internal::kInvalidCodePoint) {
      out += s[i];
    } else {
      f(d.cp, out);
    }
    i += d.bytes;
  }
  return out;
}

utf8proc_category_t category(char32_t cp) {
  return cp > 0x10FFFF ? UTF8PROC_CATEGORY_CN : utf8proc_category(as_utf8proc(cp));
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_code_points(s, [](char32_t cp, std::string& out) { append_upper(cp, out); });
}

std::string py_lower(std::string_view s) {
  return map_code_points(s, [](char32_t cp, std::string& out) { append_lower(cp, out); });
}

bool py_isalpha(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

bool py_isdigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return category(cp) == UTF8PROC_CATEGORY_ND;
}

bool py_isalnum(char32_t cp) {
  if (py_isalpha(cp) || py_isdigit(cp)) return true;
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool py_iscased_lower(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  return category(cp) == UTF8PROC_CATEGORY_LL;
}

bool py_iscased_upper(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT;
}

}  // namespace prefixgate::canon::jinja
