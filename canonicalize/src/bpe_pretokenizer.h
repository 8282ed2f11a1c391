// Hand-written scanners for the Split regexes of Llama 3, Qwen2/Qwen3 and GPT-2 (the fast path
// of tokenizer_pre_tokenizer.h): they split text into the pieces ("pre-tokens") that BPE merges
// never cross, as the Split regex of a tokenizer.json would.
//
// Instead of a regex engine, each known pattern is a hand-written scanner over code points that
// reproduces the regex's leftmost-first alternation, including the backtracking of `\s+(?!\S)`.
// Each of these patterns matches at every position, so splitting with behavior "Isolated" is
// the same as taking one match after another.
//
//   PatternScanner pre(SplitPattern::kLlama3);
//   for (std::size_t pos = 0; pos < text.size();) {
//     std::size_t end = pre.match_end(text, pos);   // text[pos, end) is one pre-token
//     pos = end;
//   }
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "char_class.h"

namespace prefixgate::canon::internal {

enum class SplitPattern {
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // The same with \p{N} in place of \p{N}{1,3} (Qwen2, Qwen2.5, Qwen3).
  kQwen2,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // (the ByteLevel pre-tokenizer's own, use_regex=true).
  kGpt2,
};

// The pattern whose tokenizer.json Split regex is exactly `regex`, if we implement it.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// The regex source of a pattern, as tokenizer.json spells it.
std::string_view split_pattern_regex(SplitPattern pattern);

class PatternScanner {
 public:
  explicit PatternScanner(SplitPattern pattern) : pattern_(pattern) {}

  // The end of the pre-token that starts at `pos` (pos < text.size(); result > pos).
  std::size_t match_end(std::string_view text, std::size_t pos) const {
    return pattern_ == SplitPattern::kGpt2 ? gpt2_match_end(text, pos)
                                           : llama3_match_end(text, pos);
  }
  SplitPattern pattern() const { return pattern_; }

 private:
  std::size_t llama3_match_end(std::string_view text, std::size_t pos) const;
  std::size_t gpt2_match_end(std::string_view text, std::size_t pos) const;

  SplitPattern pattern_;
  CharClassifier classify_;
};

}  // namespace prefixgate::canon::internal
