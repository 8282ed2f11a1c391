#include "bpe_tokenizer.h"

#include <algorithm>

#include "bpe_word_cache.h"
#include "byte_level.h"
#include "segment_cache_encode.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

// Raw bytes written in GPT-2's byte-level alphabet (the form of a byte-level vocabulary key).
std::string to_byte_level_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(kByteToUnicode[static_cast<unsigned char>(c)], out);
  return out;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec)
    : model_(std::move(spec.model)),
      normalizer_(std::move(spec.normalizer)),
      pre_tokenizer_(std::move(spec.pre_tokenizer)),
      decoder_(std::move(spec.decoder)),
      byte_level_(std::move(spec.byte_level)),
      identity_(spec.identity) {
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> normalized_patterns;
  id_limit_ = model_.id_limit();
  for (AddedToken& t : spec.added_tokens) {
    id_limit_ = std::max<std::size_t>(id_limit_, t.id + std::size_t{1});
    added_ids_[t.content] = t.id;
    added_content_[t.id] = t.content;
    if (t.special) special_ids_.push_back(t.id);
    if (t.normalized) {
      normalized_patterns.push_back(normalizer_.normalize_content(t.content));
      normalized.push_back(std::move(t));
    } else {
      raw.push_back(std::move(t));
    }
  }
  std::size_t longest = 0;
  for (const AddedToken& t : raw) {
    longest = std::max(longest, t.content.size());
    if (t.rstrip) rstrip_ids_.push_back(t.id);
  }
  std::sort(rstrip_ids_.begin(), rstrip_ids_.end());
  // Added tokens with normalized=true are found inside a stretch, never where one ends.
  added_lookahead_ = longest + 4;  // and a UTF-8 character (single_word, rstrip)
  raw_added_ = AddedTokenMatcher(std::move(raw));
  normalized_added_ = AddedTokenMatcher(std::move(normalized), std::move(normalized_patterns));
  std::sort(special_ids_.begin(), special_ids_.end());
  special_ids_.erase(std::unique(special_ids_.begin(), special_ids_.end()), special_ids_.end());

  if (decoder_.byte_level_only() && model_.alphabet() == BpeAlphabet::kBytes) {
    decode_bytes_.resize(id_limit_);
    for (TokenId id = 0; id < model_.id_limit(); ++id) {
      decode_bytes_[id] = std::string(model_.token_bytes(id));
    }
    for (const auto& [id, content] : added_content_) decode_bytes_[id] = byte_level_decode(content);
  }

  const std::string norm = normalizer_.empty() ? "none" : normalizer_.describe();
  name_ = std::string("BPE (") +
          (model_.alphabet() == BpeAlphabet::kBytes ? "byte-level" : "SentencePiece-style") +
          "; normalizer " + norm + "; pre-tokenizer " + pre_tokenizer_.describe() + "; decoder " +
          decoder_.describe() + "; " + std::to_string(id_limit_) + " ids)";
}

void BpeTokenizer::encode(std::string_view text, std::vector<TokenId>& out,
                          const EncodeOptions& options,
                          std::vector<std::size_t>* byte_offsets) const {
  // Reserved for about one token per three bytes (English prose runs about four, code about
  // three), so a long prompt's arrays are allocated once instead of copied at each doubling.
  const std::size_t expected = (text.size() - std::min(options.begin, text.size())) / 3 + 16;
  out.reserve(out.size() + expected);
  if (byte_offsets != nullptr) byte_offsets->reserve(byte_offsets->size() + expected);
  Scratch scratch;
  // A section's tokens depend on its bytes, whether it starts the text (its origin, for
  // Metaspace's prepend_scheme "first") and parse_special: what the segment cache is keyed by.
  const auto section = [&](std::size_t begin, std::size_t end) {
    const std::size_t first = out.size();
    auto key = encode_cached_section(text, begin, end, options, out, byte_offsets, scratch);
    if (options.stretches != nullptr) {
      options.stretches->push_back({begin, end, first, out.size(), false, key});
    }
  };
  // Resuming after an added token (EncodeOptions::begin) is where the search stood after it.
  const std::size_t begin = std::min(options.begin, text.size());
  AddedTokenMatcher::Cursor cursor{.scan = begin, .emitted_end = begin};
  while (const auto m = raw_added_.next(text, cursor, options.parse_special)) {
    if (m->begin > cursor.emitted_end) section(cursor.emitted_end, m->begin);
    if (options.stretches != nullptr) {
      options.stretches->push_back({m->begin, m->end, out.size(), out.size() + 1, true});
    }
    out.push_back(m->token->id);
    if (byte_offsets) byte_offsets->push_back(m->begin);
    cursor.emitted_end = m->end;
  }
  if (cursor.emitted_end < text.size()) section(cursor.emitted_end, text.size());
}

void BpeTokenizer::encode_stretch(std::string_view text, std::size_t begin, std::size_t end,
                                  const EncodeOptions& options, std::vector<TokenId>& out,
                                  std::vector<std::size_t>& byte_offsets) const {
  Scratch scratch;
  encode_cached_section(text, begin, end, options, out, &byte_offsets, scratch);
}

std::optional<SegmentCache::Key> BpeTokenizer::encode_cached_section(
    std::string_view text, std::size_t begin, std::size_t end, const EncodeOptions& options,
    std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets, Scratch& scratch) const {
  return internal::encode_segment(options, identity_, text.substr(begin, end - begin), begin, out,
                                  byte_offsets, scratch.segment_offsets,
                                  [&](std::vector<TokenId>& o, std::vector<std::size_t>* offs) {
                                    encode_section(text, begin, end, options, o, offs, scratch);
                                  });
}

void BpeTokenizer::encode_section(std::string_view text, std::size_t begin, std::size_t end,
                                  const EncodeOptions& options, std::vector<TokenId>& out,
                                  std::vector<std::size_t>* byte_offsets, Scratch& scratch) const {
  const std::string_view section = text.substr(begin, end - begin);
  // Where normalized bytes came from is needed for offsets (once the text may be rewritten)
  // and for Metaspace's prepend_scheme "first".
  const bool need_origin =
      pre_tokenizer_.needs_origin() || (byte_offsets != nullptr && pre_tokenizer_.rewrites());
  const bool track = need_origin || byte_offsets != nullptr;
  std::string_view normalized = section;
  const std::vector<std::uint32_t>* origin = nullptr;
  if (!normalizer_.empty() && normalizer_.normalize(section, begin, track, scratch.normalized)) {
    normalized = scratch.normalized.text;
    if (track) origin = &scratch.normalized.origin;
  } else if (need_origin) {
    scratch.identity.resize(section.size() + 1);
    for (std::size_t i = 0; i <= section.size(); ++i) {
      scratch.identity[i] = static_cast<std::uint32_t>(begin + i);
    }
    origin = &scratch.identity;
  }
  std::size_t from = 0;
  if (!normalized_added_.empty()) {
    AddedTokenMatcher::Cursor cursor;
    while (const auto m = normalized_added_.next(normalized, cursor, options.parse_special)) {
      if (m->begin > cursor.emitted_end) {
        encode_pieces(normalized, origin, cursor.emitted_end, m->begin, begin, out, byte_offsets,
                      scratch);
      }
      out.push_back(m->token->id);
      if (byte_offsets) byte_offsets->push_back(origin ? (*origin)[m->begin] : begin + m->begin);
      cursor.emitted_end = m->end;
    }
    from = cursor.emitted_end;
  }
  if (from < normalized.size()) {
    encode_pieces(normalized, origin, from, normalized.size(), begin, out, byte_offsets, scratch);
  }
}

void BpeTokenizer::encode_pieces(std::string_view text, const std::vector<std::uint32_t>* origin,
                                 std::size_t begin, std::size_t end, std::size_t input_offset,
                                 std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets,
                                 Scratch& scratch) const {
  scratch.bpe.words = &WordCache::for_tokenizer(identity_);
  const PatternScanner* scanner = pre_tokenizer_.single_scanner();
  if (scanner && model_.alphabet() == BpeAlphabet::kBytes) {
    // The common byte-level case: pre-tokens straight from the scanner into the model.
    const std::string_view section = text.substr(0, end);
    for (std::size_t p = begin; p < end;) {
      const std::size_t e = scanner->match_end(section, p);
      const std::string_view word = section.substr(p, e - p);
      const std::size_t first = out.size();
      model_.encode_word(word, out, scratch.bpe);
      if (byte_offsets) {
        // Byte-level tokens cover exactly their bytes.
        std::size_t pos = p;
        for (std::size_t i = first; i < out.size(); ++i) {
          byte_offsets->push_back(origin ? (*origin)[pos] : input_offset + pos);
          pos += model_.token_bytes(out[i]).size();
        }
      }
      p = e;
    }
    return;
  }
  PreTokenizerScratch& pre = scratch.pre;
  pre_tokenizer_.run(text.substr(begin, end - begin), origin ? origin->data() + begin : nullptr,
                     pre);
  for (const PieceRange piece : pre.pieces) {
    const std::string_view word = pre.text.substr(piece.begin, piece.end - piece.begin);
    if (!byte_offsets) {
      model_.encode_word(word, out, scratch.bpe);
      continue;
    }
    scratch.lengths.clear();
    model_.encode_word(word, out, scratch.bpe, &scratch.lengths);
    std::size_t pos = piece.begin;
    for (const std::uint32_t length : scratch.lengths) {
      // With an origin, the input character the token's first byte came from; otherwise the
      // text is the input's own.
      byte_offsets->push_back(pre.origin ? pre.origin[pos] : input_offset + begin + pos);
      pos += length;
    }
  }
}

std::string BpeTokenizer::token_string(TokenId id) const {
  if (const auto it = added_content_.find(id); it != added_content_.end()) return it->second;
  if (!model_.has_token(id)) return {};
  const std::string_view bytes = model_.token_bytes(id);
  if (model_.alphabet() == BpeAlphabet::kBytes && id < byte_level_.size() && byte_level_[id]) {
    return to_byte_level_text(bytes);
  }
  return std::string(bytes);
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids) const {
  if (!decode_bytes_.empty()) {
    std::string text;
    for (TokenId id : ids) {
      // An id outside the vocabulary decodes to nothing: there are no bytes to give back.
      if (id < decode_bytes_.size()) text += decode_bytes_[id];
    }
    return text;
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (added_content_.count(id) || model_.has_token(id)) tokens.push_back(token_string(id));
  }
  return decoder_.decode(std::move(tokens));
}

std::optional<TokenId> BpeTokenizer::special_token(std::string_view text) const {
  const auto it = added_ids_.find(std::string(text));
  if (it == added_ids_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(TokenId id) const {
  return std::binary_search(special_ids_.begin(), special_ids_.end(), id);
}

}  // namespace prefixgate::canon::internal
