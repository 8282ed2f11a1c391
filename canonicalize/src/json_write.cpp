// The two json::Value writers (compact and RFC 8785 canonical) and their building blocks:
// string quoting, ECMAScript number formatting and UTF-16 key order.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/json_string_scan.h"

namespace prefixgate::json {
namespace {

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Decodes the code point at s[pos] and advances pos past it. Returns its UTF-16 form as one
// integer that sorts like the code units themselves: a BMP character c is (c << 16), a
// supplementary one is (high surrogate << 16 | low surrogate). A byte that does not start
// well-formed UTF-8 (Unicode table 3-7) is taken alone as (0xDC00 + byte) << 16, the
// "surrogateescape" trick: no valid character maps there, so distinct strings never compare
// equal and the order stays a strict weak order even for strings that break our invariant.
std::uint32_t next_utf16_key(std::string_view s, std::size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const auto invalid = [&] {
    ++pos;
    return (0xDC00u + b0) << 16;
  };
  if (b0 < 0x80) {
    ++pos;
    return std::uint32_t{b0} << 16;
  }
  std::size_t len = 0;
  std::uint32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0Fu;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07u;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return invalid();
  }
  if (s.size() - pos < len) return invalid();
  const auto b1 = static_cast<unsigned char>(s[pos + 1]);
  if (b1 < lo || b1 > hi) return invalid();
  cp = (cp << 6) | (b1 & 0x3Fu);
  for (std::size_t k = 2; k < len; ++k) {
    const auto bk = static_cast<unsigned char>(s[pos + k]);
    if (!is_continuation(bk)) return invalid();
    cp = (cp << 6) | (bk & 0x3Fu);
  }
  pos += len;
  if (cp < 0x10000) return cp << 16;
  cp -= 0x10000;
  return ((0xD800u + (cp >> 10)) << 16) | (0xDC00u + (cp & 0x3FFu));
}

// ECMA-262 Number::toString (section 6.1.6.1.20; 7.1.12.1 in editions up to ES2019), for
// finite, non-zero, positive x. std::to_chars without a precision gives the shortest digit
// string that round-trips and, among those, the one closest to x: exactly the k digits and
// exponent n the algorithm asks for.
void append_positive_finite(double x, std::string& out) {
  char sci[32];
  const auto [sci_end, ec] = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific);
  PG_DCHECK(ec == std::errc());
  (void)ec;
  // sci is "d[.ddd]e(+|-)x": gather the digits and the exponent.
  char digits[24];
  int k = 0;
  const char* p = sci;
  digits[k++] = *p++;
  if (*p == '.') {
    for (++p; *p != 'e'; ++p) digits[k++] = *p;
  }
  ++p;  // 'e'
  const bool negative_exponent = *p == '-';
  ++p;  // sign
  int exponent = 0;
  std::from_chars(p, sci_end, exponent);
  if (negative_exponent) exponent = -exponent;
  const int n = exponent + 1;  // x = 0.digits * 10^n
  const std::string_view d(digits, static_cast<std::size_t>(k));

  if (k <= n && n <= 21) {  // step 6: integer, digits then n - k zeros
    out += d;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {  // step 7: the point falls inside the digits
    out += d.substr(0, static_cast<std::size_t>(n));
    out += '.';
    out += d.substr(static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {  // step 8: 0.000ddd
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += d;
  } else {  // steps 9-10: exponent form, "e+" or "e-" and no leading zeros
    out += d[0];
    if (k > 1) {
      out += '.';
      out += d.substr(1);
    }
    out += 'e';
    out += n - 1 < 0 ? '-' : '+';
    char exp_text[8];
    const auto [exp_end, exp_ec] =
        std::to_chars(exp_text, exp_text + sizeof exp_text, std::abs(n - 1));
    PG_DCHECK(exp_ec == std::errc());
    (void)exp_ec;
    out.append(exp_text, exp_end);
  }
}

// Members of `object` in RFC 8785 section 3.2.3 order (UTF-16 code units of the keys).
// Returns false, with *duplicate set, if two members share a key: canonical order would then
// depend on input order, which is exactly what canonical form must not do.
bool sorted_members(const Object& object, std::vector<const Member*>& sorted,
                    const Member** duplicate) {
  sorted.clear();
  sorted.reserve(object.size());
  for (const Member& m : object) sorted.push_back(&m);
  // Bodies that are already canonical (or were written by sorted code) skip the sort.
  const auto less = [](const Member* a, const Member* b) { return utf16_less(a->key, b->key); };
  if (!std::is_sorted(sorted.begin(), sorted.end(), less)) {
    std::stable_sort(sorted.begin(), sorted.end(), less);
  }
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1]->key == sorted[i]->key) {
      *duplicate = sorted[i];
      return false;
    }
  }
  return true;
}

bool write_canonical(const Value& value, std::string& out, Error& error) {
  switch (value.type()) {
    case Type::kNull: out += "null"; return true;
    case Type::kBool: out += value.as_bool() ? "true" : "false"; return true;
    case Type::kNumber: {
      // RFC 8785 section 3.2.2.3: the double, in ECMAScript form; the source text is ignored.
      const double x = value.as_number().value;
      if (!std::isfinite(x)) {
        error = make_error(ErrorCode::kInvalidValue,
                           "NaN and Infinity have no JSON form (RFC 8785 section 3.2.2.3)");
        return false;
      }
      append_number(x, out);
      return true;
    }
    case Type::kString: append_quoted(value.as_string(), out); return true;
    case Type::kArray: {
      out += '[';
      const Array& items = value.as_array();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ',';
        if (!write_canonical(items[i], out, error)) {
          prepend_path_index(i, error.param);
          return false;
        }
      }
      out += ']';
      return true;
    }
    case Type::kObject: {
      std::vector<const Member*> sorted;
      const Member* duplicate = nullptr;
      if (!sorted_members(value.as_object(), sorted, &duplicate)) {
        error = make_error(ErrorCode::kDuplicateKey,
                           "object has the key \"" + duplicate->key + "\" more than once");
        prepend_path_key(duplicate->key, error.param);
        return false;
      }
      out += '{';
      for (std::size_t i = 0; i < sorted.size(); ++i) {
        if (i > 0) out += ',';
        append_quoted(sorted[i]->key, out);
        out += ':';
        if (!write_canonical(sorted[i]->value, out, error)) {
          prepend_path_key(sorted[i]->key, error.param);
          return false;
        }
      }
      out += '}';
      return true;
    }
  }
  return true;
}

}  // namespace

void append_quoted(std::string_view s, std::string& out) {
  // RFC 8785 section 3.2.2.2: the two-character escapes for " \ and five controls, \u00xx
  // (lowercase hex) for the other controls, every other character (including DEL, '/' and all
  // non-ASCII) as raw UTF-8. Safe runs are copied in one append.
  static constexpr char kHex[] = "0123456789abcdef";
  // The plain bytes up to the first that needs an escape. Most strings written (keys, names)
  // have none: written with one growth and one copy.
  std::size_t plain = 0;
  while (plain + 8 <= s.size() && !word_needs_escape(s.data() + plain)) plain += 8;
  while (plain < s.size()) {
    const auto c = static_cast<unsigned char>(s[plain]);
    if (c < 0x20 || c == '"' || c == '\\') break;
    ++plain;
  }
  if (plain == s.size()) {
    const std::size_t at = out.size();
    out.resize(at + s.size() + 2);
    char* p = out.data() + at;
    *p = '"';
    if (!s.empty()) std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    return;
  }
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  std::size_t run_start = 0;
  for (std::size_t i = plain; i < s.size(); ++i) {
    // Eight bytes at a time while none needs escaping (prompts are long runs of plain text).
    while (i + 8 <= s.size() && !word_needs_escape(s.data() + i)) i += 8;
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run_start, i - run_start);
    run_start = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(escape, sizeof escape);
      }
    }
  }
  out.append(s.data() + run_start, s.size() - run_start);
  out += '"';
}

void append_number(double x, std::string& out) {
  // ECMA-262 Number::toString steps 1-4: NaN, both zeros, sign, infinity.
  if (std::isnan(x)) {
    out += "NaN";
  } else if (x == 0) {
    out += '0';  // -0 too
  } else if (std::isinf(x)) {
    out += x < 0 ? "-Infinity" : "Infinity";
  } else {
    if (x < 0) out += '-';
    append_positive_finite(std::fabs(x), out);
  }
}

std::string format_number(double x) {
  std::string out;
  append_number(x, out);
  return out;
}

bool utf16_less(std::string_view a, std::string_view b) {
  // Byte-equal prefixes are equal in UTF-16 too; only the code point where the strings first
  // differ decides. Back up to its first byte: a byte that is not a continuation byte in both
  // strings starts a code point in both (no UTF-8 sequence spans a non-continuation byte).
  const std::size_t common = static_cast<std::size_t>(
      std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
  if (common == a.size() && common == b.size()) return false;
  const auto continues_at = [](std::string_view s, std::size_t i) {
    return i < s.size() && is_continuation(static_cast<unsigned char>(s[i]));
  };
  std::size_t start = common;
  while (start > 0 && (continues_at(a, start) || continues_at(b, start))) --start;
  // For valid UTF-8 the first step decides; the loop only matters for malformed input.
  std::size_t pa = start, pb = start;
  for (;;) {
    if (pa == a.size()) return pb < b.size();
    if (pb == b.size()) return false;
    const std::uint32_t ka = next_utf16_key(a, pa);
    const std::uint32_t kb = next_utf16_key(b, pb);
    if (ka != kb) return ka < kb;
  }
}

namespace {
// A path segment is followed by '.' only when a key comes next: a.b, a[0], [0].b, ["a b"].c.
void join_rest(std::string& segment, const std::string& rest) {
  if (!rest.empty() && rest[0] != '[') segment += '.';
  segment += rest;
}
}  // namespace

void prepend_path_key(std::string_view key, std::string& path) {
  const bool identifier = !key.empty() && !(key[0] >= '0' && key[0] <= '9') &&
                          std::all_of(key.begin(), key.end(), [](char c) {
                            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                   (c >= '0' && c <= '9') || c == '_';
                          });
  std::string segment;
  if (identifier) {
    segment = key;
  } else {
    segment = "[";
    append_quoted(key, segment);
    segment += ']';
  }
  join_rest(segment, path);
  path = std::move(segment);
}

void prepend_path_index(std::size_t index, std::string& path) {
  std::string segment = "[" + std::to_string(index) + "]";
  join_rest(segment, path);
  path = std::move(segment);
}

std::string to_json(const Value& value) {
  std::string out;
  append_json(value, out);
  return out;
}

void append_json(const Value& value, std::string& out) {
  switch (value.type()) {
    case Type::kNull: out += "null"; return;
    case Type::kBool: out += value.as_bool() ? "true" : "false"; return;
    case Type::kNumber: {
      const Number& number = value.as_number();
      if (!number.source.empty()) {
        out += number.source;
      } else if (std::isfinite(number.value)) {
        append_number(number.value, out);
      } else {
        out += "null";  // as JSON.stringify writes NaN and Infinity; to_json cannot fail
      }
      return;
    }
    case Type::kString: append_quoted(value.as_string(), out); return;
    case Type::kArray: {
      out += '[';
      bool first = true;
      for (const Value& item : value.as_array()) {
        if (!first) out += ',';
        first = false;
        append_json(item, out);
      }
      out += ']';
      return;
    }
    case Type::kObject: {
      out += '{';
      bool first = true;
      for (const Member& m : value.as_object()) {
        if (!first) out += ',';
        first = false;
        append_quoted(m.key, out);
        out += ':';
        append_json(m.value, out);
      }
      out += '}';
      return;
    }
  }
}

Result<std::string> to_canonical_json(const Value& value) {
  std::string out;
  Error error{ErrorCode::kInvalidValue, {}, {}};
  if (!write_canonical(value, out, error)) return error;
  return out;
}

Value canonicalized(const Value& value) {
  switch (value.type()) {
    case Type::kNumber: return Value(Number{value.as_number().value, {}});
    case Type::kArray: {
      Array items;
      items.reserve(value.as_array().size());
      for (const Value& item : value.as_array()) items.push_back(canonicalized(item));
      return Value(std::move(items));
    }
    case Type::kObject: {
      Object members;
      members.reserve(value.as_object().size());
      for (const Member& m : value.as_object())
        members.push_back(Member{m.key, canonicalized(m.value)});
      std::stable_sort(members.begin(), members.end(),
                       [](const Member& a, const Member& b) { return utf16_less(a.key, b.key); });
      return Value(std::move(members));
    }
    default: return value;
  }
}

void canonicalize_in_place(Value& value) {
  switch (value.type()) {
    case Type::kNumber: {
      if (!value.as_number().source.empty()) value = Value(Number{value.as_number().value, {}});
      return;
    }
    case Type::kArray:
      for (Value& item : value.as_array()) canonicalize_in_place(item);
      return;
    case Type::kObject: {
      Object& members = value.as_object();
      for (Member& m : members) canonicalize_in_place(m.value);
      const auto less = [](const Member& a, const Member& b) { return utf16_less(a.key, b.key); };
      // Most objects are small and many already sorted (a client that sends canonical JSON):
      // std::stable_sort allocates a buffer for each, an insertion sort (stable too) none.
      constexpr std::size_t kInsertionSortMax = 16;
      if (members.size() <= kInsertionSortMax) {
        for (std::size_t i = 1; i < members.size(); ++i) {
          if (!less(members[i], members[i - 1])) continue;
          Member moving = std::move(members[i]);
          std::size_t j = i;
          for (; j > 0 && less(moving, members[j - 1]); --j) members[j] = std::move(members[j - 1]);
          members[j] = std::move(moving);
        }
      } else if (!std::is_sorted(members.begin(), members.end(), less)) {
        std::stable_sort(members.begin(), members.end(), less);
      }
      return;
    }
    default: return;
  }
}

bool is_canonical(const Value& value) {
  switch (value.type()) {
    case Type::kNumber: {
      const Number& n = value.as_number();
      return n.source.empty() || n.source == format_number(n.value);
    }
    case Type::kArray:
      for (const Value& item : value.as_array()) {
        if (!is_canonical(item)) return false;
      }
      return true;
    case Type::kObject: {
      const Object& members = value.as_object();
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i > 0 && !utf16_less(members[i - 1].key, members[i].key)) return false;
        if (!is_canonical(members[i].value)) return false;
      }
      return true;
    }
    default: return true;
  }
}

}  // namespace prefixgate::json
