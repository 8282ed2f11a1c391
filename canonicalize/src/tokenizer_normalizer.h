// The normalizer of a tokenizer.json: what Hugging Face tokenizers does to each stretch of text
// between added tokens before splitting it. Supported: null, NFC, Prepend, Replace (String or
// Regex pattern), Strip, Sequence of these. Anything else is refused at load.
//
// When offsets are wanted, normalization also says where each byte of its output came from
// (AlignedText::origin): a byte a step inserted (Prepend, a Replace's content) comes from the
// input character it was attached to, as in Hugging Face's alignments.
//
//   auto n = read_normalizer(root);           // at load
//   AlignedText out;
//   if (n->normalize(section, offset, /*track=*/true, out)) use(out); else use(section);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nfc_normalizer.h"
#include "prefixgate/base/status.h"
#include "tokenizer_regex.h"

namespace prefixgate::canon::internal {

// Text on its way to the model. origin[i] is the input offset of the input character byte i
// came from, with one more entry for the end; empty when nobody asked for offsets.
struct AlignedText {
  std::string text;
  std::vector<std::uint32_t> origin;
};

class Normalizer {
 public:
  struct Step {
    enum class Kind { kNfc, kPrepend, kReplace, kStrip };
    Kind kind = Kind::kNfc;
    std::string text;                      // kPrepend: what to prepend; kReplace: the content
    std::shared_ptr<const Regex> pattern;  // kReplace
    bool left = false, right = false;      // kStrip
  };

  Normalizer() = default;
  explicit Normalizer(std::vector<Step> steps);

  bool empty() const { return steps_.empty(); }
  std::string describe() const;

  // Normalizes `input`, which starts at `input_offset` of the caller's text. Returns false when
  // the text is unchanged (then `out` is not filled); otherwise `out` holds the result, and,
  // with `track`, its origin.
  bool normalize(std::string_view input, std::size_t input_offset, bool track,
                 AlignedText& out) const;

  // The normalized form of an added token's content (normalized=true tokens are matched so).
  std::string normalize_content(std::string_view content) const;

 private:
  std::vector<Step> steps_;
  std::optional<NfcNormalizer> nfc_;  // built only when a step needs it (~20 ms, once)
};

struct Field;  // tokenizer_json.h (simdjson stays out of this header)

// Reads root.normalizer. Errors: kUnsupported naming the type or option we do not implement.
Result<Normalizer> read_normalizer(const Field& root);
// The same from the JSON of the normalizer alone ("null", {"type": ...}).
Result<Normalizer> normalizer_from_json(std::string_view json);

}  // namespace prefixgate::canon::internal
