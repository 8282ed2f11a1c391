// The byte tokenizer: id = byte value, plus the chat-template special tokens from id 256.
#include <algorithm>
#include <array>
#include <cstring>

#include "added_tokens.h"
#include "prefixgate/canonicalize/tokenizer.h"
#include "segment_cache_encode.h"

namespace prefixgate::canon {
namespace {

constexpr std::array<std::string_view, 7> kSpecials = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>",        "<|im_start|>",    "<|im_end|>",
};
constexpr TokenId kFirstSpecialId = 256;
// The longest special token's bytes and a UTF-8 character (Tokenizer::added_token_lookahead).
constexpr std::size_t kLookahead =
    std::max_element(kSpecials.begin(), kSpecials.end(),
                     [](std::string_view a, std::string_view b) { return a.size() < b.size(); })
        ->size() +
    4;
constexpr std::uint64_t kIdentity = 0x62797465746f6b31;  // "bytetok1"

class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer() {
    std::vector<internal::AddedToken> tokens;
    for (std::size_t i = 0; i < kSpecials.size(); ++i) {
      tokens.push_back({.content = std::string(kSpecials[i]),
                        .id = static_cast<TokenId>(kFirstSpecialId + i),
                        .special = true});
    }
    specials_ = internal::AddedTokenMatcher(std::move(tokens));
  }

  std::string_view name() const override { return "byte"; }
  std::size_t vocab_size() const override { return kFirstSpecialId + kSpecials.size(); }
  std::uint64_t identity() const override { return kIdentity; }

  void encode(std::string_view text, std::vector<TokenId>& out, const EncodeOptions& options,
              std::vector<std::size_t>* byte_offsets) const override {
    // At most one token per byte: reserved once, so a long prompt's arrays are not copied
    // each time they double (30 KB is 30 K tokens and, with offsets, 240 KB more).
    const std::size_t start = std::min(options.begin, text.size());
    out.reserve(out.size() + text.size() - start);
    if (byte_offsets != nullptr) byte_offsets->reserve(byte_offsets->size() + text.size() - start);
    std::vector<std::size_t> scratch;
    const auto bytes = [&](std::size_t begin, std::size_t end) {
      const std::size_t first = out.size();
      encode_bytes(text, begin, end, options, out, byte_offsets, scratch);
      if (options.stretches != nullptr && end > begin) {
        options.stretches->push_back({begin, end, first, out.size(), false});
      }
    };
    if (!options.parse_special) {
      bytes(start, text.size());
      return;
    }
    std::size_t pos = start;
    while (true) {
      const auto m = specials_.find(text, pos, /*include_special=*/true);
      const std::size_t end = m ? m->begin : text.size();
      bytes(pos, end);
      if (!m) break;
      if (options.stretches != nullptr) {
        options.stretches->push_back({m->begin, m->end, out.size(), out.size() + 1, true});
      }
      out.push_back(m->token->id);
      if (byte_offsets) byte_offsets->push_back(m->begin);
      pos = m->end;
    }
  }

  void encode_stretch(std::string_view text, std::size_t begin, std::size_t end,
                      const EncodeOptions& options, std::vector<TokenId>& out,
                      std::vector<std::size_t>& byte_offsets) const override {
    std::vector<std::size_t> scratch;
    encode_bytes(text, begin, end, options, out, &byte_offsets, scratch);
  }

  std::string decode(std::span<const TokenId> ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (TokenId id : ids) {
      if (id < kFirstSpecialId) {
        text += static_cast<char>(id);
      } else if (id - kFirstSpecialId < kSpecials.size()) {
        text += kSpecials[id - kFirstSpecialId];
      }  // ids this tokenizer never produces decode to nothing
    }
    return text;
  }

  bool is_special(TokenId id) const override {
    return id >= kFirstSpecialId && id < kFirstSpecialId + kSpecials.size();
  }

 protected:
  bool one_token_per_stretch_byte() const override { return true; }
  std::size_t added_token_lookahead() const override { return kLookahead; }
  bool takes_space_after(TokenId) const override { return false; }

  std::optional<TokenId> special_token(std::string_view text) const override {
    for (std::size_t i = 0; i < kSpecials.size(); ++i) {
      if (kSpecials[i] == text) return static_cast<TokenId>(kFirstSpecialId + i);
    }
    return std::nullopt;
  }

 private:
  // The tokens of text[begin, end), which holds no special token, through the segment cache.
  static void encode_bytes(std::string_view text, std::size_t begin, std::size_t end,
                           const EncodeOptions& options, std::vector<TokenId>& out,
                           std::vector<std::size_t>* byte_offsets,
                           std::vector<std::size_t>& scratch) {
    const std::string_view segment = text.substr(begin, end - begin);
    internal::encode_segment(options, kIdentity, segment, begin, out, byte_offsets, scratch,
                             [&](std::vector<TokenId>& o, std::vector<std::size_t>* offs) {
                               append_bytes(segment, begin, o, offs);
                             });
  }

  // A widening copy, which the compiler vectorizes: this is what keeps the tokenizer at memory
  // speed.
  static void append_bytes(std::string_view bytes, std::size_t offset, std::vector<TokenId>& out,
                           std::vector<std::size_t>* byte_offsets) {
    const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
    out.insert(out.end(), src, src + bytes.size());
    if (byte_offsets) {
      const std::size_t old_offsets = byte_offsets->size();
      byte_offsets->resize(old_offsets + bytes.size());
      std::size_t* o = byte_offsets->data() + old_offsets;
      for (std::size_t i = 0; i < bytes.size(); ++i) o[i] = offset + i;
    }
  }

  internal::AddedTokenMatcher specials_;
};

}  // namespace

std::span<const std::string_view> byte_tokenizer_specials() {
  return kSpecials;
}

std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

}  // namespace prefixgate::canon
