// Unicode Normalization Form C (UAX #15) with a map back to the input, for tokenizers whose
// tokenizer.json has the NFC normalizer (Qwen2/Qwen3).
//
// Most text is already NFC, so the work is a scan: text is cut into chunks at code points that
// can neither change under NFC nor combine with what precedes them, and only a chunk holding a
// code point that NFC might change is handed to utf8proc. The chunks it did change are reported
// so that a caller can map positions in the normalized text back to the input.
//
//   NfcNormalizer nfc;
//   NfcResult r;
//   if (nfc.normalize(text, r)) use(r.text); else use(text);   // false: text is already NFC
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prefixgate::canon::internal {

// A piece of the input that normalization changed: input [input_begin, input_end) became
// normalized [normalized_begin, normalized_end). Everything between two changes is copied as is.
struct NfcChange {
  std::size_t input_begin;
  std::size_t input_end;
  std::size_t normalized_begin;
  std::size_t normalized_end;
};

struct NfcResult {
  std::string text;
  std::vector<NfcChange> changes;  // in order, disjoint
};

class NfcNormalizer {
 public:
  // Builds (once per process, on first construction, ~20 ms) the per-code-point flags below.
  NfcNormalizer();

  // Returns false when `input` is already NFC (then `out` is left empty); otherwise fills `out`.
  // A malformed UTF-8 byte is passed through and never combines with anything.
  bool normalize(std::string_view input, NfcResult& out) const;

 private:
  // flags_[cp]: bit 0 = "boundary": canonical combining class 0, no canonical decomposition, and
  // never the second code point of a canonical composition, so NFC never changes it nor joins it
  // to what precedes it, and text can be cut in front of it. Bit 1 = "suspect": NFC might change
  // a chunk holding it (non-zero combining class, a possible second of a composition, or a code
  // point whose NFC is not itself).
  const std::uint8_t* flags_;
};

}  // namespace prefixgate::canon::internal
