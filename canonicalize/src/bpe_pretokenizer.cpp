#include "bpe_pretokenizer.h"

#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

struct ClassifiedCodePoint {
  char32_t cp;
  std::uint32_t bytes;
  CharClass cls;
};

class Scanner {
 public:
  Scanner(std::string_view text, const CharClassifier& classify)
      : text_(text), classify_(classify) {}

  std::size_t size() const { return text_.size(); }

  ClassifiedCodePoint at(std::size_t pos) const {
    const DecodedCodePoint d = decode_utf8(text_, pos);
    return {d.cp, d.bytes, classify_(d.cp)};
  }

  bool has_class_at(std::size_t pos, CharClass cls) const {
    return pos < text_.size() && at(pos).cls == cls;
  }

  // The end of the run of code points of class `cls` starting at `pos`, at most `max_count` long.
  std::size_t run_end(std::size_t pos, CharClass cls, std::size_t max_count = SIZE_MAX) const {
    std::size_t count = 0;
    while (pos < text_.size() && count < max_count) {
      // ASCII fast path: most runs are ASCII letters or digits.
      const auto byte = static_cast<unsigned char>(text_[pos]);
      if (byte < 0x80) {
        if (classify_(byte) != cls) break;
        ++pos;
      } else {
        const ClassifiedCodePoint c = at(pos);
        if (c.cls != cls) break;
        pos += c.bytes;
      }
      ++count;
    }
    return pos;
  }

  // The contraction ('s 't 're 've 'm 'll 'd) that starts at `pos` (text[pos] == '\''): its end,
  // or 0 when there is none.
  std::size_t contraction_end(std::size_t pos, bool case_insensitive) const {
    std::size_t p1 = pos + 1;
    if (p1 >= text_.size()) return 0;
    const DecodedCodePoint c1 = decode_utf8(text_, p1);
    const char l1 = contraction_letter(c1.cp, case_insensitive);
    const std::size_t p2 = p1 + c1.bytes;
    if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return p2;
    if ((l1 == 'r' || l1 == 'v' || l1 == 'l') && p2 < text_.size()) {
      const DecodedCodePoint c2 = decode_utf8(text_, p2);
      if (contraction_letter(c2.cp, case_insensitive) == (l1 == 'l' ? 'l' : 'e')) {
        return p2 + c2.bytes;
      }
    }
    return 0;
  }

  // The whitespace alternatives at `pos`, where a White_Space code point starts:
  //   (with_newline_alternative) \s*[\r\n]+   then   \s+(?!\S)   then   \s+
  std::size_t whitespace_end(std::size_t pos, bool with_newline_alternative) const {
    std::size_t end = pos;
    std::size_t last_start = pos;
    std::size_t last_newline_end = 0;
    while (end < text_.size()) {
      const ClassifiedCodePoint c = at(end);
      if (!is_white_space(c.cls)) break;
      last_start = end;
      end += c.bytes;
      if (c.cls == CharClass::kNewline) last_newline_end = end;
    }
    // \s*[\r\n]+: \s* backtracks to the last CR/LF of the run, which [\r\n]+ then takes (the
    // code point after it is not CR/LF, or it would not be the last).
    if (with_newline_alternative && last_newline_end != 0) return last_newline_end;
    // \s+(?!\S): the whole run at the end of the text; otherwise the run less its last code
    // point, which stays to prefix the word that follows ("  word" -> " ", " word").
    if (end == text_.size()) return end;
    if (last_start > pos) return last_start;
    return end;  // \s+: a single whitespace code point before a non-space
  }

 private:
  std::string_view text_;
  const CharClassifier& classify_;
};

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  return std::nullopt;
}

std::string_view split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
    case SplitPattern::kGpt2: return kGpt2Regex;
  }
  return {};
}

std::size_t PatternScanner::llama3_match_end(std::string_view text, std::size_t pos) const {
  const Scanner s(text, classify_);
  const ClassifiedCodePoint c0 = s.at(pos);
  const std::size_t p1 = pos + c0.bytes;

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c0.cp == '\'') {
    if (const std::size_t end = s.contraction_end(pos, /*case_insensitive=*/true)) return end;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+  (the optional code point is tried first: it is greedy)
  if (c0.cls == CharClass::kLetter) return s.run_end(p1, CharClass::kLetter);
  if ((c0.cls == CharClass::kOther || c0.cls == CharClass::kSpace) &&
      s.has_class_at(p1, CharClass::kLetter)) {
    return s.run_end(p1, CharClass::kLetter);
  }
  // \p{N}{1,3}  or  \p{N}
  if (c0.cls == CharClass::kNumber) {
    return s.run_end(p1, CharClass::kNumber, pattern_ == SplitPattern::kLlama3 ? 2 : 0);
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  std::size_t symbols = SIZE_MAX;
  if (c0.cp == ' ' && s.has_class_at(p1, CharClass::kOther)) {
    symbols = p1;
  } else if (c0.cls == CharClass::kOther) {
    symbols = pos;
  }
  if (symbols != SIZE_MAX) {
    return s.run_end(s.run_end(symbols, CharClass::kOther), CharClass::kNewline);
  }
  // What is left starts with whitespace.
  return s.whitespace_end(pos, /*with_newline_alternative=*/true);
}

std::size_t PatternScanner::gpt2_match_end(std::string_view text, std::size_t pos) const {
  const Scanner s(text, classify_);
  const ClassifiedCodePoint c0 = s.at(pos);
  const std::size_t p1 = pos + c0.bytes;

  // 's|'t|'re|'ve|'m|'ll|'d  (case-sensitive here)
  if (c0.cp == '\'') {
    if (const std::size_t end = s.contraction_end(pos, /*case_insensitive=*/false)) return end;
  }
  //  ?\p{L}+|  ?\p{N}+|  ?[^\s\p{L}\p{N}]+
  if (c0.cp == ' ' && p1 < text.size()) {
    const CharClass next = s.at(p1).cls;
    if (next == CharClass::kLetter || next == CharClass::kNumber || next == CharClass::kOther) {
      return s.run_end(p1, next);
    }
  }
  if (c0.cls == CharClass::kLetter || c0.cls == CharClass::kNumber || c0.cls == CharClass::kOther) {
    return s.run_end(p1, c0.cls);
  }
  return s.whitespace_end(pos, /*with_newline_alternative=*/false);
}

}  // namespace prefixgate::canon::internal
