// Tokenizers: text to the token ids an engine sees.
//
// Two kinds, behind one interface:
//   - the byte tokenizer, the embedded default: token id = byte value (0..255), plus a few
//     special tokens (see byte_tokenizer_specials()) so chat templates can mark turns;
//   - Hugging Face `tokenizer.json` of model type BPE, whose ids match Hugging Face tokenizers
//     exactly: byte-level BPE (Llama 3/3.1, Qwen 2.5/3, DeepSeek V3, GPT-OSS, Mistral Nemo) and
//     SentencePiece-style BPE (Llama 2, Mistral 7B, Gemma 2/3). Supported components:
//       normalizers     NFC, Prepend, Replace (String or Regex), Strip, Sequence, none;
//       pre-tokenizers  Split (String or Regex pattern, every behavior, invert), ByteLevel
//                       (add_prefix_space, use_regex, trim_offsets), Digits, Metaspace
//                       (replacement, prepend_scheme first/always/never, split), Sequence, none;
//       model           BPE with ignore_merges, byte_fallback, unk_token, fuse_unk;
//       decoders        ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, none;
//       added tokens    special or not, single_word, lstrip, rstrip, normalized.
//     Anything else (WordPiece/Unigram/WordLevel models, other component types, an option we
//     do not read, a regex construct we cannot match exactly) is refused at load.
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
#include "prefixgate/canonicalize/segment_cache.h"

namespace prefixgate::canon {

struct EncodeOptions {
  // Recognise the text of special tokens ("<|eot_id|>") and emit their ids. Off means such
  // text is tokenized as ordinary text, as for untrusted user content (Hugging Face's
  // split_special_tokens=True). Added tokens that tokenizer.json marks non-special, like
  // Qwen3's "<think>", are vocabulary and always recognised, as Hugging Face does.
  bool parse_special = true;
  // Stretches of text between special tokens are looked up in (and added to) this cache, with
  // the same ids and offsets as without it (segment_cache.h). Borrowed; null = none.
  SegmentCache* segment_cache = nullptr;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "byte" for the byte tokenizer, otherwise a short description of the loaded model.
  virtual std::string_view name() const = 0;
  virtual std::size_t vocab_size() const = 0;
  // Equal for two tokenizers that encode every text alike, different otherwise (a hash of the
  // tokenizer.json text; a constant for the byte tokenizer): what segment caches are keyed by.
  virtual std::uint64_t identity() const = 0;

  // Appends the ids of `text` to `out` (no BOS/EOS: the chat template writes those). When
  // `byte_offsets` is given, appends for each token the byte offset in `text` of the input its
  // first byte came from: offsets never decrease and lie inside `text`; where normalization left
  // the text as it was, a token's bytes are exactly those at its offset; a byte a normalizer or
  // pre-tokenizer inserted (SentencePiece's "▁" prefix) counts as part of the character it was
  // attached to, and text that NFC rewrote maps to the start of the rewritten stretch.
  virtual void encode(std::string_view text, std::vector<TokenId>& out,
                      const EncodeOptions& options = {},
                      std::vector<std::size_t>* byte_offsets = nullptr) const = 0;

  // The text of the tokens (special tokens as their text), through the tokenizer.json decoder
  // as Hugging Face decodes, so decode(encode(text)) == text wherever Hugging Face gives the
  // text back. Bytes that are not UTF-8 (a character split across ids) are returned as bytes,
  // not U+FFFD, so that pieces decoded one by one concatenate; ids outside the vocabulary
  // decode to nothing. Decoders that depend on position (Metaspace, Strip: SentencePiece's
  // leading space) make decode(a + b) differ from decode(a) + decode(b).
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

// Loads a Hugging Face tokenizer.json of model type "BPE" (the components above).
// Errors: kInvalidJson; kUnsupported naming what is not implemented, with Error::param its JSON
// path ("pre_tokenizer.pretokenizers[1].type", "model.type"); kInvalidValue (a merge of unknown
// tokens, an unk_token not in the vocabulary, a malformed regex); kWrongType and kMissingField
// for a document of the wrong shape.
Result<std::unique_ptr<Tokenizer>> load_tokenizer_json(std::string_view tokenizer_json);

}  // namespace prefixgate::canon
