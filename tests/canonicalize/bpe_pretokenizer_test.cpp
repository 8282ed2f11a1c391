// The hand-written split-pattern scanners against splits produced by Hugging Face tokenizers
// (the `tokenizers` npm package 0.23.2, PreTokenizer.preTokenizeString, on the Llama-3 and
// Qwen3 tokenizer.json files and on ByteLevel(use_regex=true)). The cases include those where
// transformers.js differs: U+0085 is \s and U+FEFF is not, and 'ſ is a contraction.
#include "../../canonicalize/src/bpe_pretokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace prefixgate::canon::internal {
namespace {

struct SplitCase {
  std::string text;
  std::vector<std::string> pieces;
};

std::vector<std::string> split(SplitPattern pattern, std::string_view text) {
  const PatternScanner pre(pattern);
  std::vector<std::string> pieces;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = pre.match_end(text, pos);
    if (end <= pos || end > text.size()) {
      ADD_FAILURE() << "match_end(" << pos << ") = " << end << " for a text of " << text.size();
      break;
    }
    pieces.emplace_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

// clang-format off
const std::vector<SplitCase> kLlama3Cases = {
    {"Hello world", {"Hello", " world"}},
    {"  word", {" ", " word"}},
    {"a  \n\n b", {"a", "  \n\n", " b"}},
    {"1234567", {"123", "456", "7"}},
    {"x1234y", {"x", "123", "4", "y"}},
    {"it'S I'M we'LL they'Re 'd", {"it", "'S", " I", "'M", " we", "'LL", " they", "'Re", " '", "d"}},
    {"'\xc5\xbft x'\xc5\xbf", {"'\xc5\xbf", "t", " x", "'\xc5\xbf"}},
    {"a\xc2\x85" "b", {"a", "\xc2\x85" "b"}},
    {"a \xc2\x85 b", {"a", " \xc2\x85", " b"}},
    {"x\xef\xbb\xbf y", {"x", "\xef\xbb\xbf", " y"}},
    {"!\xef\xbb\xbf!", {"!\xef\xbb\xbf!"}},
    {" ?!\n\n", {" ?!\n\n"}},
    {"x\r\n\r\n  y", {"x", "\r\n\r\n", " ", " y"}},
    {"tab\tsep", {"tab", "\tsep"}},
    {"end   ", {"end", "   "}},
    {"\xc2\xa0word", {"\xc2\xa0word"}},
    {"\xe3\x80\x80\xe4\xb8\xad\xe6\x96\x87", {"\xe3\x80\x80\xe4\xb8\xad\xe6\x96\x87"}},
    {" 123", {" ", "123"}},
    {"(x)\n", {"(x", ")\n"}},
    {"<|im_start|>user", {"<|", "im", "_start", "|>", "user"}},
    {"\t\n \tz", {"\t\n", " ", "\tz"}},
    {"don't", {"don", "'t"}},
    {"$$$ 45", {"$$$", " ", "45"}},
    {"e\xcc\x81t\xc3\xa9", {"e", "\xcc\x81t\xc3\xa9"}},
    {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ok", {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " ok"}},
    {"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4", {"\xd9\xa1\xd9\xa2\xd9\xa3", "\xd9\xa4"}},
    {"A\n\n\nB", {"A", "\n\n\n", "B"}},
    {"x \n", {"x", " \n"}},
    {"'", {"'"}},
    {"'s", {"'s"}},
    {"  ", {"  "}},
    {"\xe2\x80\xa8\xe2\x80\xa9x", {"\xe2\x80\xa8", "\xe2\x80\xa9x"}},
    {"\n ", {"\n", " "}},
    {"a_b-c", {"a", "_b", "-c"}},
};

const std::vector<SplitCase> kQwen2Cases = {
    {"Hello world", {"Hello", " world"}},
    {"  word", {" ", " word"}},
    {"a  \n\n b", {"a", "  \n\n", " b"}},
    {"1234567", {"1", "2", "3", "4", "5", "6", "7"}},
    {"x1234y", {"x", "1", "2", "3", "4", "y"}},
    {"it'S I'M we'LL they'Re 'd", {"it", "'S", " I", "'M", " we", "'LL", " they", "'Re", " '", "d"}},
    {"'\xc5\xbft x'\xc5\xbf", {"'\xc5\xbf", "t", " x", "'\xc5\xbf"}},
    {"a\xc2\x85" "b", {"a", "\xc2\x85" "b"}},
    {"a \xc2\x85 b", {"a", " \xc2\x85", " b"}},
    {"x\xef\xbb\xbf y", {"x", "\xef\xbb\xbf", " y"}},
    {"!\xef\xbb\xbf!", {"!\xef\xbb\xbf!"}},
    {" ?!\n\n", {" ?!\n\n"}},
    {"x\r\n\r\n  y", {"x", "\r\n\r\n", " ", " y"}},
    {"tab\tsep", {"tab", "\tsep"}},
    {"end   ", {"end", "   "}},
    {"\xc2\xa0word", {"\xc2\xa0word"}},
    {"\xe3\x80\x80\xe4\xb8\xad\xe6\x96\x87", {"\xe3\x80\x80\xe4\xb8\xad\xe6\x96\x87"}},
    {" 123", {" ", "1", "2", "3"}},
    {"(x)\n", {"(x", ")\n"}},
    {"<|im_start|>user", {"<|", "im", "_start", "|>", "user"}},
    {"\t\n \tz", {"\t\n", " ", "\tz"}},
    {"don't", {"don", "'t"}},
    {"$$$ 45", {"$$$", " ", "4", "5"}},
    {"e\xcc\x81t\xc3\xa9", {"e", "\xcc\x81t\xc3\xa9"}},
    {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ok", {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " ok"}},
    {"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4", {"\xd9\xa1", "\xd9\xa2", "\xd9\xa3", "\xd9\xa4"}},
    {"A\n\n\nB", {"A", "\n\n\n", "B"}},
    {"x \n", {"x", " \n"}},
    {"'", {"'"}},
    {"'s", {"'s"}},
    {"  ", {"  "}},
    {"\xe2\x80\xa8\xe2\x80\xa9x", {"\xe2\x80\xa8", "\xe2\x80\xa9x"}},
    {"\n ", {"\n", " "}},
    {"a_b-c", {"a", "_b", "-c"}},
};

const std::vector<SplitCase> kGpt2Cases = {
    {"Hello world", {"Hello", " world"}},
    {"  word", {" ", " word"}},
    {"a  \n\n b", {"a", "  \n\n", " b"}},
    {"1234567", {"1234567"}},
    {"x1234y", {"x", "1234", "y"}},
    {"it'S I'M we'LL they'Re 'd", {"it", "'", "S", " I", "'", "M", " we", "'", "LL", " they", "'", "Re", " '", "d"}},
    {"'\xc5\xbft x'\xc5\xbf", {"'", "\xc5\xbft", " x", "'", "\xc5\xbf"}},
    {"a\xc2\x85" "b", {"a", "\xc2\x85", "b"}},
    {"a \xc2\x85 b", {"a", " \xc2\x85", " b"}},
    {"x\xef\xbb\xbf y", {"x", "\xef\xbb\xbf", " y"}},
    {"!\xef\xbb\xbf!", {"!\xef\xbb\xbf!"}},
    {" ?!\n\n", {" ?!", "\n\n"}},
    {"x\r\n\r\n  y", {"x", "\r\n\r\n ", " y"}},
    {"tab\tsep", {"tab", "\t", "sep"}},
    {"end   ", {"end", "   "}},
    {"\xc2\xa0word", {"\xc2\xa0", "word"}},
    {"\xe3\x80\x80\xe4\xb8\xad\xe6\x96\x87", {"\xe3\x80\x80", "\xe4\xb8\xad\xe6\x96\x87"}},
    {" 123", {" 123"}},
    {"(x)\n", {"(", "x", ")", "\n"}},
    {"<|im_start|>user", {"<|", "im", "_", "start", "|>", "user"}},
    {"\t\n \tz", {"\t\n ", "\t", "z"}},
    {"don't", {"don", "'t"}},
    {"$$$ 45", {"$$$", " 45"}},
    {"e\xcc\x81t\xc3\xa9", {"e", "\xcc\x81", "t\xc3\xa9"}},
    {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ok", {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " ok"}},
    {"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4", {"\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4"}},
    {"A\n\n\nB", {"A", "\n\n", "\n", "B"}},
    {"x \n", {"x", " \n"}},
    {"'", {"'"}},
    {"'s", {"'s"}},
    {"  ", {"  "}},
    {"\xe2\x80\xa8\xe2\x80\xa9x", {"\xe2\x80\xa8", "\xe2\x80\xa9", "x"}},
    {"\n ", {"\n "}},
    {"a_b-c", {"a", "_", "b", "-", "c"}},
};
// clang-format on

void expect_splits(SplitPattern pattern, const std::vector<SplitCase>& cases) {
  for (const SplitCase& c : cases) {
    EXPECT_EQ(split(pattern, c.text), c.pieces) << "text: \"" << c.text << "\"";
  }
}

TEST(BpePreTokenizerTest, Llama3PatternSplitsAsHuggingFace) {
  expect_splits(SplitPattern::kLlama3, kLlama3Cases);
}

TEST(BpePreTokenizerTest, Qwen2PatternSplitsAsHuggingFace) {
  expect_splits(SplitPattern::kQwen2, kQwen2Cases);
}

TEST(BpePreTokenizerTest, Gpt2PatternSplitsAsHuggingFace) {
  expect_splits(SplitPattern::kGpt2, kGpt2Cases);
}

TEST(BpePreTokenizerTest, RecognisesOnlyTheKnownRegexes) {
  for (SplitPattern p : {SplitPattern::kLlama3, SplitPattern::kQwen2, SplitPattern::kGpt2}) {
    EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(p)), p);
  }
  EXPECT_FALSE(split_pattern_from_regex(""));
  EXPECT_FALSE(split_pattern_from_regex("\\s+"));
  // One character off (\p{N}{1,2}) is another pattern, not an approximation of a known one.
  std::string almost(split_pattern_regex(SplitPattern::kLlama3));
  almost.replace(almost.find("{1,3}"), 5, "{1,2}");
  EXPECT_FALSE(split_pattern_from_regex(almost));
}

// Any bytes at all, including malformed UTF-8, split into non-empty pieces that add up to the
// input: nothing is lost, nothing loops.
TEST(BpePreTokenizerTest, PiecesCoverAnyInputExactly) {
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             "'",
                                             "s",
                                             "L",
                                             " ",
                                             "  ",
                                             "\t",
                                             "\r",
                                             "\n",
                                             "1",
                                             "\xd9\xa3",
                                             ".",
                                             "!",
                                             "_",
                                             "\xc2\x85",
                                             "\xef\xbb\xbf",
                                             "\xe3\x80\x80",
                                             "\xe4\xb8\xad",
                                             "\xcc\x81",
                                             "\xc5\xbf",
                                             "\xf0\x9f\x98\x80",
                                             "\xff",
                                             "\xc3",
                                             "\xe4\xb8",
                                             "\xed\xa0\x80",
                                             "\x80",
                                             std::string(1, '\0')};
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 30);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
    for (SplitPattern p : {SplitPattern::kLlama3, SplitPattern::kQwen2, SplitPattern::kGpt2}) {
      std::string joined;
      for (const std::string& piece : split(p, text)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      EXPECT_EQ(joined, text);
    }
  }
}

}  // namespace
}  // namespace prefixgate::canon::internal
