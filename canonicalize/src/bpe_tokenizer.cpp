#include "bpe_tokenizer.h"

#include <algorithm>

namespace prefixgate::canon::internal {
namespace {

std::string_view pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kLlama3: return "llama3";
    case SplitPattern::kQwen2: return "qwen2";
    case SplitPattern::kGpt2: return "gpt2";
  }
  return "?";
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec)
    : model_(std::move(spec.model)),
      pre_tokenizer_(spec.pattern),
      added_(std::move(spec.added_tokens)) {
  if (spec.nfc) nfc_.emplace();
  std::size_t ids = model_.id_limit();
  for (const AddedToken& t : added_.tokens()) ids = std::max<std::size_t>(ids, t.id + 1);
  decode_table_.resize(ids);
  for (TokenId id = 0; id < model_.id_limit(); ++id) decode_table_[id] = model_.token_bytes(id);
  for (const AddedToken& t : added_.tokens()) {
    decode_table_[t.id] = t.content;
    added_ids_[t.content] = t.id;
    if (t.special) special_ids_.push_back(t.id);
  }
  std::sort(special_ids_.begin(), special_ids_.end());
  name_ = "byte-level BPE (" + std::string(pattern_name(spec.pattern)) + " pre-tokenizer" +
          (spec.nfc ? ", NFC" : "") + ", " + std::to_string(ids) + " ids)";
}

void BpeTokenizer::encode(std::string_view text, std::vector<TokenId>& out,
                          const EncodeOptions& options,
                          std::vector<std::size_t>* byte_offsets) const {
  Scratch scratch;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto m = added_.find(text, pos, options.parse_special);
    const std::size_t section_end = m ? m->begin : text.size();
    if (section_end > pos) encode_section(text, pos, section_end, out, byte_offsets, scratch);
    if (!m) break;
    out.push_back(m->token->id);
    if (byte_offsets) byte_offsets->push_back(m->begin);
    pos = m->end;
  }
}

void BpeTokenizer::encode_section(std::string_view text, std::size_t begin, std::size_t end,
                                  std::vector<TokenId>& out, std::vector<std::size_t>* byte_offsets,
                                  Scratch& scratch) const {
  const std::string_view section = text.substr(begin, end - begin);
  std::string_view normalized = section;
  const std::vector<NfcChange>* changes = nullptr;
  if (nfc_ && nfc_->normalize(section, scratch.nfc)) {
    normalized = scratch.nfc.text;
    changes = &scratch.nfc.changes;
  }
  std::size_t next_change = 0;  // the first change that does not end before the pre-token
  for (std::size_t p = 0; p < normalized.size();) {
    const std::size_t e = pre_tokenizer_.match_end(normalized, p);
    const std::size_t first_token = out.size();
    model_.encode_word(normalized.substr(p, e - p), out, scratch.bpe);
    if (byte_offsets) {
      // Where the pre-token starts in the input, and whether its tokens' own offsets hold
      // there (they do unless normalization changed part of the pre-token).
      std::size_t input_pos = p;
      bool exact = true;
      if (changes) {
        while (next_change < changes->size() && (*changes)[next_change].normalized_end <= p) {
          ++next_change;
        }
        if (next_change > 0) {
          const NfcChange& before = (*changes)[next_change - 1];
          input_pos = p - before.normalized_end + before.input_end;
        }
        if (next_change < changes->size() && (*changes)[next_change].normalized_begin < e) {
          exact = false;
          const NfcChange& c = (*changes)[next_change];
          if (p >= c.normalized_begin) input_pos = c.input_begin;
        }
      }
      std::size_t offset = begin + input_pos;
      for (std::size_t i = first_token; i < out.size(); ++i) {
        byte_offsets->push_back(offset);
        if (exact) offset += model_.token_bytes(out[i]).size();
      }
    }
    p = e;
  }
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids) const {
  std::string text;
  for (TokenId id : ids) {
    // An id outside the vocabulary decodes to nothing: there are no bytes to give back.
    if (id < decode_table_.size()) text += decode_table_[id];
  }
  return text;
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
