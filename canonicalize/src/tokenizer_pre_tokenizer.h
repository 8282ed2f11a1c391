// The pre-tokenizer of a tokenizer.json: splits normalized text into the pieces that BPE merges
// never cross, as Hugging Face tokenizers does. Supported, alone or in a Sequence:
//   - Split: a {"String"} or {"Regex"} pattern (tokenizer_regex.h), with each behavior
//     (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous) and invert;
//   - ByteLevel: add_prefix_space, use_regex (GPT-2's pattern), trim_offsets (offsets only);
//     it must come last, since Hugging Face rewrites the text into its byte alphabet there;
//   - Digits (individual_digits);
//   - Metaspace: replacement, prepend_scheme first/always/never (or the older
//     add_prefix_space), split.
// The Split regexes of Llama 3, Qwen2/2.5/3 and GPT-2 run as the hand-written scanners of
// bpe_pretokenizer.h; any other pattern runs on the backtracking matcher.
//
//   PreTokenizerScratch s;
//   pipeline.run(section, origin, s);
//   for (auto piece : s.pieces) model.encode_word(s.text().substr(piece.begin, ...), ...);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpe_pretokenizer.h"
#include "prefixgate/base/status.h"
#include "tokenizer_regex.h"

namespace prefixgate::canon::internal {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
enum class PrependScheme { kFirst, kAlways, kNever };

struct PreTokenizerStep {
  enum class Kind { kSplit, kDigits, kByteLevel, kMetaspace };
  Kind kind = Kind::kSplit;
  // kSplit: a hand-written scanner when the regex is one we know, else `regex`.
  std::optional<PatternScanner> scanner;
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kDigits
  bool individual_digits = false;
  // kByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
  // kMetaspace
  std::string replacement;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};

struct PieceRange {
  std::uint32_t begin;
  std::uint32_t end;
};

// Buffers of one encode() call, reused from section to section.
struct PreTokenizerScratch {
  std::vector<PieceRange> pieces;  // the result, into text()
  // The text the pieces index (the input, or a rewritten copy) and its origin (empty: the
  // input's own offsets).
  std::string_view text;
  const std::uint32_t* origin = nullptr;  // text.size() + 1 entries

  std::string buffers[2];
  std::vector<std::uint32_t> origins[2];
  std::vector<PieceRange> next_pieces;
  std::vector<RegexMatch> matches;
  std::vector<std::pair<PieceRange, bool>> marked;  // (range, is a match)
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps);
  // Movable only: single_scanner_ points into steps_.
  PreTokenizer(PreTokenizer&&) = default;
  PreTokenizer& operator=(PreTokenizer&&) = default;
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  bool byte_level() const { return byte_level_; }
  // Metaspace with prepend_scheme "first" needs to know where pieces came from.
  bool needs_origin() const { return needs_origin_; }
  // Whether some step rewrites the text (so offsets need an origin to map back).
  bool rewrites() const { return rewrites_; }
  // When the whole pipeline is one hand-written scanner splitting in isolation (Llama 3, Qwen,
  // GPT-2), that scanner: callers can then take pre-tokens one by one without run().
  const PatternScanner* single_scanner() const { return single_scanner_; }
  std::string describe() const;

  // Splits `text` (with `origin`: text.size() + 1 input offsets, or null when not tracked;
  // needs_origin() requires it) into scratch.pieces of scratch.text.
  void run(std::string_view text, const std::uint32_t* origin, PreTokenizerScratch& scratch) const;

 private:
  void split_step(const PreTokenizerStep& step, PreTokenizerScratch& s) const;
  void rewrite_step(const PreTokenizerStep& step, PreTokenizerScratch& s) const;

  std::vector<PreTokenizerStep> steps_;
  bool byte_level_ = false;
  bool needs_origin_ = false;
  bool rewrites_ = false;
  const PatternScanner* single_scanner_ = nullptr;
};

struct Field;  // tokenizer_json.h (simdjson stays out of this header)

// Reads root.pre_tokenizer. Errors: kUnsupported naming the type or option we do not implement
// (Error::param is its JSON path).
Result<PreTokenizer> read_pre_tokenizer(const Field& root);
// The same from the JSON of the pre_tokenizer alone ("null", {"type": ...}).
Result<PreTokenizer> pre_tokenizer_from_json(std::string_view json);

}  // namespace prefixgate::canon::internal
