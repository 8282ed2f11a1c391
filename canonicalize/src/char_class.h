// The character classes the byte-level BPE split patterns are written in: \p{L}, \p{N}, \s, and
// [\r\n], resolved once per code point instead of by a regex engine.
//
// \s is Unicode's White_Space property, which is what Hugging Face tokenizers' Oniguruma (and
// Rust's regex crate) mean by it: U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. ECMAScript's \s differs in two code
// points: it adds U+FEFF and leaves out U+0085. We follow Hugging Face, whose ids the engines see.
#pragma once

#include <array>
#include <cstdint>

namespace prefixgate::canon::internal {

enum class CharClass : std::uint8_t {
  kOther,    // none of the below (punctuation, symbols, marks, controls, malformed bytes)
  kLetter,   // \p{L}: general category Lu, Ll, Lt, Lm, Lo
  kNumber,   // \p{N}: general category Nd, Nl, No
  kSpace,    // \s other than CR and LF
  kNewline,  // '\r' or '\n' (also \s)
};

// One entry per BMP code point; built on first use (thread-safe), about 1 ms.
const std::array<CharClass, 0x10000>& bmp_char_classes();

// The class of a code point outside the BMP (or kInvalidCodePoint).
CharClass supplementary_char_class(char32_t cp);

// The table lookups a scanner needs, with the BMP table fetched once.
class CharClassifier {
 public:
  CharClassifier() : bmp_(bmp_char_classes().data()) {}
  CharClass operator()(char32_t cp) const {
    return cp < 0x10000 ? bmp_[cp] : supplementary_char_class(cp);
  }

 private:
  const CharClass* bmp_;
};

// The Unicode general category of a code point, as utf8proc numbers them (UTF8PROC_CATEGORY_*:
// 0 = Cn unassigned, 1 = Lu, ... 29 = Co), from a table built on first use (thread-safe).
// kInvalidCodePoint has kNoCategory, which no \p{...} names.
inline constexpr std::uint8_t kNoCategory = 30;
std::uint8_t general_category(char32_t cp);

// Unicode's White_Space property (\s), for any code point.
bool is_white_space_code_point(char32_t cp);

inline bool is_white_space(CharClass c) {
  return c == CharClass::kSpace || c == CharClass::kNewline;
}

// For the contraction alternatives ('s, 't, 're, 've, 'm, 'll, 'd): the ASCII lowercase letter
// `cp` stands for, or 0. Case-insensitively, `(?i:...)` in Oniguruma matches by Unicode simple
// case folding, under which U+017F LATIN SMALL LETTER LONG S is also 's' (no other code point
// folds to one of these seven letters).
inline char contraction_letter(char32_t cp, bool case_insensitive) {
  if (cp >= 'a' && cp <= 'z') return static_cast<char>(cp);
  if (!case_insensitive) return 0;
  if (cp >= 'A' && cp <= 'Z') return static_cast<char>(cp - 'A' + 'a');
  if (cp == 0x017F) return 's';
  return 0;
}

}  // namespace prefixgate::canon::internal
