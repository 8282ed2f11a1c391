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

// One unit of an encoding: a stretch of text between added tokens (the points where every
// tokenizer here splits its input, so a stretch's tokens depend only on its own bytes, where it
// starts and parse_special), or one added token. encode() lists them when asked
// (EncodeOptions::stretches): a caller that skipped the per-token byte offsets can still find a
// byte's token later (Tokenizer::token_at_byte), re-encoding at most the stretch it lies in.
struct EncodedStretch {
  std::size_t byte_begin = 0;   // in the encoded text
  std::size_t byte_end = 0;     // the stretch's end (an added token: its match, stripped space too)
  std::size_t token_begin = 0;  // index in encode()'s `out` of its first token
  std::size_t token_end = 0;
  bool added_token = false;
  // The segment cache key encode() looked the stretch up by, when it went through a cache: what
  // token_at_byte finds its offsets by, without hashing its bytes again.
  std::optional<SegmentCache::Key> cache_key = {};
};

struct EncodeOptions {
  // Recognise the text of special tokens ("<|eot_id|>") and emit their ids. Off means such
  // text is tokenized as ordinary text, as for untrusted user content (Hugging Face's
  // split_special_tokens=True). Added tokens that tokenizer.json marks non-special, like
  // Qwen3's "<think>", are vocabulary and always recognised, as Hugging Face does.
  bool parse_special = true;
  // Stretches of text between special tokens are looked up in (and added to) this cache, with
  // the same ids and offsets as without it (segment_cache.h). Borrowed; null = none.
  SegmentCache* segment_cache = nullptr;
  // When set, encode() appends an EncodedStretch for each stretch and added token, in order.
  std::vector<EncodedStretch>* stretches = nullptr;
  // Where in `text` encode() starts: 0, or the end of the added token that ends the stretches
  // Tokenizer::resumable_stretches() allowed for another encoding sharing text's bytes before
  // it. Then `out` must already hold those stretches' tokens (and `stretches` them): what
  // encode() appends is what encoding all of `text` would give after them.
  std::size_t begin = 0;
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

  // The tokens and byte offsets (into `text`) that encode(text, ..., options) gives for its
  // stretch text[begin, end), which must be one that encode() listed (not an added token).
  // Through options.segment_cache when set; options.stretches is not used.
  virtual void encode_stretch(std::string_view text, std::size_t begin, std::size_t end,
                              const EncodeOptions& options, std::vector<TokenId>& out,
                              std::vector<std::size_t>& byte_offsets) const = 0;

  // What TokenizedPrompt::token_at_byte gives from the byte offsets of encode(text, out,
  // options), found from the stretches encode() listed instead: the index of the last token
  // whose offset is at most `offset` (0 when none is). The stretch that `offset` lies in is read
  // from the segment cache by the key encode() gave it, where the cache still holds it (its
  // offsets searched in place), else encoded again into `scratch`. `scratch` is reused, so that
  // asking about several bytes of one stretch encodes it at most once; clear it when `text`
  // changes.
  struct StretchScratch {
    std::size_t stretch = static_cast<std::size_t>(-1);  // the stretch the scratch is about
    // Its segment cache key, when it has one: then `tokens` and `offsets` are not filled unless
    // the cache has let it go.
    std::optional<SegmentCache::Key> key;
    std::vector<TokenId> tokens;
    std::vector<std::size_t> offsets;
    void clear() { stretch = static_cast<std::size_t>(-1); }
  };
  std::size_t token_at_byte(std::string_view text, std::span<const EncodedStretch> stretches,
                            std::size_t offset, const EncodeOptions& options,
                            StretchScratch& scratch) const;

  // How many leading stretches of an encoding (`stretches` and `tokens`, as encode() gave them
  // with parse_special on) every text that shares the encoded text's first `shared` bytes
  // encodes alike, the last of them an added token after which encode() can resume
  // (EncodeOptions::begin); 0 when there are none. Exact because encode() finds added tokens
  // left to right, deciding each from the bytes up to a lookahead past it, and a stretch's tokens
  // depend only on its bytes and where it starts (segment_cache.h).
  std::size_t resumable_stretches(std::span<const EncodedStretch> stretches,
                                  std::span<const TokenId> tokens, std::size_t shared) const;

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

 protected:
  // Whether the token of a stretch's byte i is its token i (the byte tokenizer's): then
  // token_at_byte needs no encoding at all.
  virtual bool one_token_per_stretch_byte() const { return false; }
  // How many bytes past an added token's end deciding it (and that none starts earlier) may
  // read: the longest added token's bytes, and one UTF-8 character that single_word and
  // whitespace stripping look at.
  virtual std::size_t added_token_lookahead() const = 0;
  // Whether the added token `id` takes the whitespace after it (rstrip): encode() does not
  // resume after such a token, whose end depends on what follows.
  virtual bool takes_space_after(TokenId id) const = 0;
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
