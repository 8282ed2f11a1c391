#include "server/text_output.h"

#include <algorithm>

namespace prefixgate::engine::server {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is invalid or cut off.
// Follows RFC 3629 section 4 (no overlongs, no surrogates, nothing above U+10FFFF).
std::size_t valid_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

}  // namespace

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = valid_sequence_length(text, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::size_t incomplete_utf8_tail(std::string_view text) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto b = static_cast<unsigned char>(text[text.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    std::size_t need = 0;
    if (b >= 0xC2 && b <= 0xDF)
      need = 2;
    else if (b >= 0xE0 && b <= 0xEF)
      need = 3;
    else if (b >= 0xF0 && b <= 0xF4)
      need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

std::vector<canon::TokenId> standalone_text_tokens(const canon::Tokenizer& tokenizer,
                                                   canon::TokenId limit) {
  std::vector<canon::TokenId> out;
  const auto end = std::min<std::size_t>(limit, tokenizer.vocab_size());
  for (std::size_t i = 0; i < end; ++i) {
    const auto id = static_cast<canon::TokenId>(i);
    if (tokenizer.is_special(id)) continue;
    const std::string text = tokenizer.decode(std::span<const canon::TokenId>(&id, 1));
    if (text.empty()) continue;
    bool ok = true;
    for (std::size_t at = 0; ok && at < text.size();) {
      const std::size_t len = valid_sequence_length(text, at);
      const auto b = static_cast<unsigned char>(text[at]);
      ok = len > 0 && (b >= 0x20 || b == '\n' || b == '\t') && b != 0x7F;
      at += len;
    }
    if (ok) out.push_back(id);
  }
  return out;
}

TextOutput::TextOutput(const canon::Tokenizer& tokenizer, TextOutputOptions options)
    : tokenizer_(tokenizer), options_(std::move(options)) {
  std::erase_if(options_.stop, [](const std::string& s) { return s.empty(); });
  for (const std::string& s : options_.stop) max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
}

void TextOutput::append(canon::TokenId token) {
  if (stopped_) return;
  ++token_count_;
  if (options_.skip_token_enabled && token == options_.skip_token) return;
  // Special tokens (turn markers, EOS) are not text, as with skip_special_tokens.
  if (tokenizer_.is_special(token)) return;
  // A stop string can only newly appear in the part that changed, plus its own length back.
  const std::size_t from = raw_.size() > max_stop_bytes_ ? raw_.size() - max_stop_bytes_ : 0;
  raw_ += decode_next(token);
  std::size_t cut = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& s : options_.stop) {
    const std::size_t at = raw_.find(s, from);
    if (at < cut) {
      cut = at;
      matched = &s;
    }
  }
  if (matched != nullptr) {
    raw_.resize(cut);
    stopped_ = true;
    stop_string_ = *matched;
  }
}

std::string TextOutput::decode_next(canon::TokenId token) {
  // A token's text can depend on what precedes it: SentencePiece-style decoders turn a leading
  // "▁" into a space except at the very start of the text. So the new text is what decoding the
  // last few tokens with the new one adds to decoding them without it (as Hugging Face's
  // DecodeStream does); a short window keeps this linear in the output length.
  constexpr std::size_t kContextTokens = 4;
  const std::size_t context = std::min(ids_.size(), kContextTokens);
  ids_.push_back(token);
  const std::span<const canon::TokenId> with(ids_.data() + ids_.size() - context - 1, context + 1);
  if (context == 0) return tokenizer_.decode(with);
  const std::string before = tokenizer_.decode(with.first(context));
  std::string after = tokenizer_.decode(with);
  if (after.starts_with(before)) return after.substr(before.size());
  // A decoder whose output for the context changed with the new token (it cannot happen with
  // the decoders tokenizer.json declares): the token's own text, never a duplicate of earlier.
  return tokenizer_.decode(with.last(1));
}

std::string TextOutput::take_delta(bool final) {
  std::size_t end = raw_.size();
  if (!final && !stopped_) {
    // Hold back what could still be the start of a stop string...
    end -= std::min(end, max_stop_bytes_ > 0 ? max_stop_bytes_ - 1 : 0);
    // ...and a character whose remaining bytes have not been generated yet.
    end -= incomplete_utf8_tail(std::string_view(raw_).substr(0, end));
  }
  if (end <= taken_) return {};
  // A held-back byte earlier could have been cut mid-character only by a stop string; repair
  // whatever is invalid in the released span.
  std::string delta = sanitize_utf8(std::string_view(raw_).substr(taken_, end - taken_));
  taken_ = end;
  return delta;
}

std::string TextOutput::text() const {
  return sanitize_utf8(raw_);
}

}  // namespace prefixgate::engine::server
