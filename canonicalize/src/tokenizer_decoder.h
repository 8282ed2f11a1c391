// The decoder of a tokenizer.json: how Hugging Face tokenizers turns token strings back into
// text. Supported, alone or in a Sequence: ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
// Strip; null joins the tokens with spaces, as Hugging Face does. Anything else is refused.
//
// One deliberate difference: where Hugging Face replaces bytes that are not UTF-8 with U+FFFD
// (ByteLevel's final from_utf8_lossy, ByteFallback's invalid <0xNN> runs), we keep the bytes, so
// that the pieces of a sequence decoded one by one concatenate to the whole; callers that emit
// text repair it (the engine's TextOutput does). For valid UTF-8 the results are the same.
//
//   Decoder d = *read_decoder(root);
//   std::string text = d.decode({"▁Hello", "▁world"});   // "Hello world" with Metaspace
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"
#include "tokenizer_regex.h"

namespace prefixgate::canon::internal {

class Decoder {
 public:
  struct Step {
    enum class Kind { kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip };
    Kind kind = Kind::kByteLevel;
    std::string replacement;               // kMetaspace: the character; kReplace: the content
    bool drop_first_replacement = true;    // kMetaspace: prepend_scheme is not "never"
    std::shared_ptr<const Regex> pattern;  // kReplace
    char32_t strip_char = U' ';            // kStrip
    std::size_t strip_start = 0, strip_stop = 0;
  };

  Decoder() = default;  // null: tokens joined with " "
  explicit Decoder(std::vector<Step> steps, bool null_decoder)
      : steps_(std::move(steps)), null_(null_decoder) {}

  // Exactly one ByteLevel step: then decoding is a concatenation of each token's bytes.
  bool byte_level_only() const {
    return !null_ && steps_.size() == 1 && steps_[0].kind == Step::Kind::kByteLevel;
  }
  std::string describe() const;

  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<Step> steps_;
  bool null_ = true;
};

// GPT-2's ByteLevel decoding of one token string: each character of the byte-level alphabet
// becomes its byte; a token holding any other character is kept as its UTF-8.
std::string byte_level_decode(std::string_view token);

struct Field;  // tokenizer_json.h (simdjson stays out of this header)

// Reads root.decoder. Errors: kUnsupported naming the type or option we do not implement.
Result<Decoder> read_decoder(const Field& root);
// The same from the JSON of the decoder alone ("null", {"type": ...}).
Result<Decoder> decoder_from_json(std::string_view json);

}  // namespace prefixgate::canon::internal
