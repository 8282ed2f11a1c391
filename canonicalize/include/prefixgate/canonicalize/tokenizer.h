// Tokenizers: text to the token ids an engine sees.
//
// Two kinds, behind one interface:
//   - the byte tokenizer, the embedded default: token id = byte value (0..255), plus a few
//     special tokens (see byte_tokenizer_specials()) so chat templates can mark turns;
//   - Hugging Face `tokenizer.json` byte-level BPE (the Llama-3 and Qwen2/Qwen3 families),
//     whose ids match the reference implementation exactly.
//
//   auto tok = canon::load_tokenizer_json(file_contents);        // or make_byte_tokenizer()
//   if (!tok) return tok.error();
//   std::vector<canon::TokenId> ids;
//   (*tok)->encode("<|begin_of_text|>Hello", ids, {.parse_special = true});
//
// canonicalize/ does no I/O: callers read tokenizer.json and hand its text in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/status.h"

namespace prefixgate::canon {

using TokenId = std::uint32_t;

struct EncodeOptions {
  // Recognise the text of special/added tokens ("<|eot_id|>") and emit their ids. Off means
  // such text is tokenized as ordinary text, as for untrusted user content. (A BPE tokenizer's
  // added tokens that tokenizer.json marks non-special, like Qwen3's "<think>", are vocabulary
  // and always recognised, as Hugging Face does with split_special_tokens=True.)
  bool parse_special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "byte" for the byte tokenizer, otherwise a short description of the loaded model.
  virtual std::string_view name() const = 0;
  virtual std::size_t vocab_size() const = 0;

  // Appends the ids of `text` to `out`. When `byte_offsets` is given, appends for each token
  // the byte offset in `text` where it starts (for normalising tokenizers, the offset of the
  // start of the pre-token it came from when normalisation changed that pre-token).
  virtual void encode(std::string_view text, std::vector<TokenId>& out,
                      const EncodeOptions& options = {},
                      std::vector<std::size_t>* byte_offsets = nullptr) const = 0;

  // The bytes of the tokens, concatenated (special tokens as their text).
  virtual std::string decode(std::span<const TokenId> ids) const = 0;

  // The id of a special/added token by its text, if this tokenizer has it.
  virtual std::optional<TokenId> special_token(std::string_view text) const = 0;

  // Whether `id` is a special token (marked special in tokenizer.json, or one of the byte
  // tokenizer's). Servers leave these out of generated text, as skip_special_tokens does.
  virtual bool is_special(TokenId id) const = 0;
};

// The byte tokenizer's special tokens, in id order from 256.
std::span<const std::string_view> byte_tokenizer_specials();
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// Loads a Hugging Face tokenizer.json (model.type "BPE" with a ByteLevel pre-tokenizer).
// Errors: kInvalidJson, kUnsupported (another model type or pre-tokenizer), kInvalidValue.
// Also kWrongType and kMissingField for a document of the wrong shape; Error::param names the
// field ("pre_tokenizer.pretokenizers[0].pattern.Regex").
Result<std::unique_ptr<Tokenizer>> load_tokenizer_json(std::string_view tokenizer_json);

}  // namespace prefixgate::canon
