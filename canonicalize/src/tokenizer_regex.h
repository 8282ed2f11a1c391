// The regular expressions of tokenizer.json (Split pre-tokenizers, Replace normalizers and
// decoders), matched as Hugging Face tokenizers matches them with Oniguruma: a backtracking
// matcher over code points, leftmost-first alternation, greedy quantifiers that give back one
// code point at a time, and Unicode semantics for \s, \d, \w and \p{...}.
//
// It implements the subset that tokenizer.json patterns use: literals and escapes, `.`,
// bracket classes with ranges and class escapes, \p{General_Category} (short and long names,
// \P and \p{^...} negations), groups ((...), (?:...), (?i:...) over literal characters),
// alternation, the quantifiers ? * + {n} {n,} {n,m} and their lazy forms, and lookahead (?=...)
// (?!...). Anything else (anchors, \b, lookbehind, backreferences, scripts like \p{Han},
// nested classes, a group repeated without bound) is refused by compile() with kUnsupported,
// so that a pattern is never matched differently from the reference.
//
// Malformed UTF-8 in the text is matched one byte at a time as a code point that has no
// Unicode property (it matches `.` and negated classes only), as the hand-written scanners in
// bpe_pretokenizer.h treat it.
//
//   auto re = Regex::compile(R"(\p{N}{1,3})");
//   if (!re) return re.error();
//   for (auto m = re->find(text, 0); m; m = re->find(text, m->end)) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"

namespace prefixgate::canon::internal {

struct RegexMatch {
  std::size_t begin;
  std::size_t end;
};

class Regex {
 public:
  // Errors: kUnsupported naming the construct and its byte offset in `pattern`; kInvalidValue
  // for a malformed pattern (an unbalanced parenthesis, an empty class, a bad range).
  static Result<Regex> compile(std::string_view pattern);
  // A pattern that matches `text` literally (tokenizer.json's {"String": ...} patterns).
  static Regex literal(std::string_view text);

  // The leftmost match that starts at or after `from` (a code point boundary), or none.
  std::optional<RegexMatch> find(std::string_view text, std::size_t from) const;

  // Every match, in order, as Oniguruma's find_iter yields them (and so Hugging Face's
  // find_matches): non-overlapping, and an empty match right where the previous match ended is
  // skipped by moving on one code point.
  void find_all(std::string_view text, std::vector<RegexMatch>& out) const;

  // Code point sets; public for the compiler in tokenizer_regex_parse.cpp.
  struct Set {
    struct Item {
      enum Kind : std::uint8_t { kRange, kCategories, kWhiteSpace } kind;
      bool negated = false;          // the item is \S, \P{..}, \D, \W
      char32_t low = 0, high = 0;    // kRange
      std::uint32_t categories = 0;  // kCategories: bit i = utf8proc category i
    };
    std::vector<Item> items;         // the set holds a code point when any item does
    bool negated = false;            // [^...]
    std::vector<std::uint64_t> bmp;  // filled by finish(): membership of U+0000..U+FFFF

    bool contains_slow(char32_t cp) const;
    bool contains(char32_t cp) const {
      if (cp < 0x10000) return (bmp[cp >> 6] >> (cp & 63)) & 1;
      return contains_slow(cp);
    }
    void finish();
  };

  // One step of the compiled program. Each step names the step that follows it; the program
  // has no cycles (unbounded repetition exists only as kRun over a single code point).
  struct Node {
    enum class Op : std::uint8_t {
      kChar,      // one code point equal to `cp`
      kCharFold,  // one code point whose simple case folding is `cp`
      kSet,       // one code point in sets_[set]
      kAny,       // any code point but '\n'
      kSplit,     // try `next`, then `alt`
      kRun,       // atom (`atom`) repeated min..max times, greedy or lazy, then `next`
      kLook,      // lookahead: the program at `alt` matches here (or, `negative`, does not)
      kMatch,     // success: the match ends here
    };
    Op op = Op::kMatch;
    bool greedy = true;
    bool negative = false;
    std::uint32_t next = 0;
    std::uint32_t alt = 0;
    std::uint32_t atom = 0;  // kRun: index of a kChar/kCharFold/kSet/kAny node
    char32_t cp = 0;
    std::uint32_t set = 0;
    std::uint32_t min = 0;
    std::uint32_t max = 0;
  };

 private:
  friend class RegexCompiler;
  friend class RegexMatcher;

  std::vector<Node> nodes_;
  std::vector<Set> sets_;
  std::uint32_t start_ = 0;
};

// Masks over utf8proc's general categories (bit i = UTF8PROC_CATEGORY i), for Regex::Set.
namespace regex_category {
inline constexpr std::uint32_t bit(int category) {
  return std::uint32_t{1} << category;
}
inline constexpr std::uint32_t kLetters = bit(1) | bit(2) | bit(3) | bit(4) | bit(5);
inline constexpr std::uint32_t kMarks = bit(6) | bit(7) | bit(8);
inline constexpr std::uint32_t kNumbers = bit(9) | bit(10) | bit(11);
inline constexpr std::uint32_t kPunctuation =
    bit(12) | bit(13) | bit(14) | bit(15) | bit(16) | bit(17) | bit(18);
inline constexpr std::uint32_t kSymbols = bit(19) | bit(20) | bit(21) | bit(22);
inline constexpr std::uint32_t kSeparators = bit(23) | bit(24) | bit(25);
inline constexpr std::uint32_t kOthers = bit(0) | bit(26) | bit(27) | bit(28) | bit(29);

}  // namespace regex_category

// The categories a \p{...} name stands for ("L", "Lu", "Letter", "Uppercase_Letter", ...).
std::optional<std::uint32_t> category_mask(std::string_view name);

// Simple case folding of one code point (CaseFolding.txt status C and S), as Oniguruma matches
// a literal under (?i).
char32_t fold_case(char32_t cp);

}  // namespace prefixgate::canon::internal
