#include "char_class.h"

#include <utf8proc.h>

#include <vector>

namespace prefixgate::canon::internal {
namespace {

bool is_unicode_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

CharClass classify(char32_t cp) {
  if (cp == '\r' || cp == '\n') return CharClass::kNewline;
  if (is_unicode_white_space(cp)) return CharClass::kSpace;
  if (cp > 0x10FFFF) return CharClass::kOther;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return CharClass::kNumber;
    default: return CharClass::kOther;
  }
}

}  // namespace

const std::array<CharClass, 0x10000>& bmp_char_classes() {
  static const std::array<CharClass, 0x10000> table = [] {
    std::array<CharClass, 0x10000> t{};
    for (char32_t cp = 0; cp < 0x10000; ++cp) t[cp] = classify(cp);
    return t;
  }();
  return table;
}

CharClass supplementary_char_class(char32_t cp) {
  return classify(cp);
}

std::uint8_t general_category(char32_t cp) {
  static const std::vector<std::uint8_t> table = [] {
    std::vector<std::uint8_t> t(0x110000);
    for (char32_t c = 0; c < 0x110000; ++c) {
      t[c] = static_cast<std::uint8_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
    }
    return t;
  }();
  return cp < table.size() ? table[cp] : kNoCategory;
}

bool is_white_space_code_point(char32_t cp) {
  return is_unicode_white_space(cp);
}

}  // namespace prefixgate::canon::internal
