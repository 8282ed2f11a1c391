// The backtracking matcher of tokenizer.json regexes: each construct, the refusals, Oniguruma's
// iteration over empty matches, and, on random text, the same pre-tokens as the hand-written
// scanners of the Llama 3, Qwen2 and GPT-2 patterns (which bpe_pretokenizer_test.cpp pins to
// Hugging Face's output).
#include "../../canonicalize/src/tokenizer_regex.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "../../canonicalize/src/bpe_pretokenizer.h"

namespace prefixgate::canon::internal {
namespace {

Regex compile(std::string_view pattern) {
  auto re = Regex::compile(pattern);
  EXPECT_TRUE(re.ok()) << pattern << ": " << re.error().message;
  return re ? std::move(*re) : Regex::literal("");
}

// The matched substrings of find_all.
std::vector<std::string> all(const Regex& re, std::string_view text) {
  std::vector<RegexMatch> matches;
  re.find_all(text, matches);
  std::vector<std::string> out;
  for (const RegexMatch& m : matches) out.emplace_back(text.substr(m.begin, m.end - m.begin));
  return out;
}

using Strings = std::vector<std::string>;

TEST(TokenizerRegexTest, MatchesLiteralsClassesAndQuantifiers) {
  EXPECT_EQ(all(compile("ab"), "xabyab"), (Strings{"ab", "ab"}));
  EXPECT_EQ(all(compile("a+"), "caaat a"), (Strings{"aaa", "a"}));
  EXPECT_EQ(all(compile("\\p{N}{1,3}"), "12345 x 6"), (Strings{"123", "45", "6"}));
  EXPECT_EQ(all(compile("[a-c]+|\\d"), "abcd12"), (Strings{"abc", "1", "2"}));
  EXPECT_EQ(all(compile("[^\\s\\p{L}]+"), "ab, -- cd!"), (Strings{",", "--", "!"}));
  EXPECT_EQ(all(compile("\\p{Lu}\\p{Ll}*"), "HelloWorld X"), (Strings{"Hello", "World", "X"}));
  EXPECT_EQ(all(compile("\\P{L}+"), "ab12cd"), (Strings{"12"}));
  EXPECT_EQ(all(compile("\\p{^L}+"), "ab12cd"), (Strings{"12"}));
  EXPECT_EQ(all(compile("\\p{Letter}+"), "ab12cd"), (Strings{"ab", "cd"}));
  EXPECT_EQ(all(compile("[一-龥]+"), "x中文y"), (Strings{"中文"}));
  EXPECT_EQ(all(compile("\\x41\\u0042\\x{43}"), "ABC"), (Strings{"ABC"}));
  EXPECT_EQ(all(compile("[\\-.]+"), "a-.b"), (Strings{"-."}));
  EXPECT_EQ(all(compile("a.c"), "abc a\nc"), (Strings{"abc"}));
  EXPECT_EQ(all(compile("x{2}"), "xxxxx"), (Strings{"xx", "xx"}));
  EXPECT_EQ(all(compile("a{,2}"), "a{,2}"), (Strings{"a{,2}"}));  // not a quantifier: literal
}

TEST(TokenizerRegexTest, AlternationIsLeftmostFirstAndQuantifiersBacktrack) {
  // Perl/Oniguruma order: the first alternative that matches wins, not the longest.
  EXPECT_EQ(all(compile("a|ab"), "ab"), (Strings{"a"}));
  EXPECT_EQ(all(compile("\\s+(?!\\S)|\\s+"), "a   b"), (Strings{"  ", " "}));
  EXPECT_EQ(all(compile("\\s*[\\r\\n]+"), "  \n \nx"), (Strings{"  \n \n"}));
  EXPECT_EQ(all(compile("a+?"), "aaa"), (Strings{"a", "a", "a"}));
  EXPECT_EQ(all(compile("(?:ab)?c"), "abc c"), (Strings{"abc", "c"}));
  EXPECT_EQ(all(compile("(ab){1,2}c"), "ababc abc"), (Strings{"ababc", "abc"}));
  EXPECT_EQ(all(compile("x(?=y)"), "xy xz"), (Strings{"x"}));
}

TEST(TokenizerRegexTest, CaseInsensitiveGroupsFoldLiterals) {
  EXPECT_EQ(all(compile("(?i:'s|'ll)"), "'S 'lL 's 'ſ"), (Strings{"'S", "'lL", "'s", "'ſ"}));
  EXPECT_EQ(all(compile("'s"), "'S 's"), (Strings{"'s"}));
}

TEST(TokenizerRegexTest, EmptyMatchesAdvanceAsOniguruma) {
  // An empty match right where the previous match ended is skipped.
  EXPECT_EQ(all(compile("a*"), "baa"), (Strings{"", "aa"}));
  EXPECT_EQ(all(compile(""), "ab").size(), 3u);
  EXPECT_EQ(all(compile("x?"), ""), (Strings{""}));
}

TEST(TokenizerRegexTest, MalformedBytesMatchOnlyNegatedClasses) {
  const std::string text =
      "a\xff"
      "b";
  EXPECT_EQ(all(compile("\\p{L}+"), text), (Strings{"a", "b"}));
  EXPECT_EQ(all(compile("[^\\p{L}]"), text), (Strings{"\xff"}));
  EXPECT_EQ(all(compile("."), text).size(), 3u);
}

TEST(TokenizerRegexTest, RefusesWhatItCannotMatchExactly) {
  struct Case {
    const char* pattern;
    const char* says;
  };
  for (const Case& c :
       {Case{"(?<=a)b", "lookbehind"}, Case{"(?<!a)b", "lookbehind"}, Case{"^a", "anchor"},
        Case{"a$", "anchor"}, Case{"\\bword", "anchor"}, Case{"(a)\\1", "backreference"},
        Case{"\\p{Han}+", "\\p{Han}"}, Case{"[a[b]]", "nested"}, Case{"[a&&b]", "intersection"},
        Case{"(ab)+", "without bound"}, Case{"(?i:[a-z])", "(?i)"}, Case{"a++", "possessive"},
        Case{"(?<n>a)", "group syntax"}}) {
    auto re = Regex::compile(c.pattern);
    ASSERT_FALSE(re.ok()) << c.pattern;
    EXPECT_EQ(re.error().code, ErrorCode::kUnsupported) << c.pattern;
    EXPECT_NE(re.error().message.find(c.says), std::string::npos)
        << c.pattern << ": " << re.error().message;
  }
  for (const char* bad : {"(a", "a)", "[a", "[z-a]", "*a", "\\p{L"}) {
    auto re = Regex::compile(bad);
    ASSERT_FALSE(re.ok()) << bad;
    EXPECT_EQ(re.error().code, ErrorCode::kInvalidValue) << bad;
  }
}

// Random text over the characters where the patterns' alternatives interact: letters, digits,
// apostrophes and contractions, punctuation, every kind of whitespace, CR/LF, marks, CJK, emoji,
// a malformed byte.
TEST(TokenizerRegexTest, AgreesWithTheHandWrittenScanners) {
  const std::vector<std::string> alphabet = {
      "a",  "Z",      "é",      "ß",      "中",     "7", "٣",    "'",  "s",  "t",
      "re", "LL",     "d",      "!",      ".",      "-", " ",    "  ", "\t", "\n",
      "\r", "\u00a0", "\u3000", "\u2028", "\u0301", "😀", "\xff", "ſ",  "_",  "ｱ"};
  std::mt19937 rng(7);
  for (const SplitPattern pattern :
       {SplitPattern::kLlama3, SplitPattern::kQwen2, SplitPattern::kGpt2}) {
    const Regex re = compile(split_pattern_regex(pattern));
    const PatternScanner scanner(pattern);
    for (int round = 0; round < 3000; ++round) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      std::vector<RegexMatch> matches;
      re.find_all(text, matches);
      std::vector<RegexMatch> scanned;
      for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t end = scanner.match_end(text, pos);
        scanned.push_back({pos, end});
        pos = end;
      }
      ASSERT_EQ(matches.size(), scanned.size()) << split_pattern_regex(pattern) << " on " << text;
      for (std::size_t i = 0; i < matches.size(); ++i) {
        ASSERT_EQ(matches[i].begin, scanned[i].begin) << text;
        ASSERT_EQ(matches[i].end, scanned[i].end) << text;
      }
    }
  }
}

}  // namespace
}  // namespace prefixgate::canon::internal
