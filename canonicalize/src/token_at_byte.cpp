// Tokenizer::token_at_byte: a byte's token from the stretches encode() listed, so that a caller
// that asks about a few bytes (lint's findings, a cache breakpoint) does not pay for an offset
// per token of every prompt.
#include <algorithm>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

std::size_t Tokenizer::token_at_byte(std::string_view text,
                                     std::span<const EncodedStretch> stretches, std::size_t offset,
                                     const EncodeOptions& options, StretchScratch& scratch) const {
  // The offsets encode() would give are those of its stretches in order, each stretch's inside
  // [byte_begin, byte_end) and never decreasing. So every token of a stretch that begins after
  // `offset` is past it, and every token of one that ends at or before it is not: only the
  // last stretch that begins at or before `offset` needs a closer look.
  const auto after =
      std::upper_bound(stretches.begin(), stretches.end(), offset,
                       [](std::size_t o, const EncodedStretch& s) { return o < s.byte_begin; });
  if (after == stretches.begin()) return 0;
  const EncodedStretch& s = *(after - 1);
  // The token before this stretch: the answer when none of the stretch's tokens qualifies.
  const std::size_t before = s.token_begin > 0 ? s.token_begin - 1 : 0;
  if (s.token_end == s.token_begin) return before;
  if (s.added_token || offset >= s.byte_end) return s.token_end - 1;
  if (one_token_per_stretch_byte()) return s.token_begin + (offset - s.byte_begin);
  const auto index = static_cast<std::size_t>(after - 1 - stretches.begin());
  if (scratch.stretch != index) {
    scratch.stretch = index;
    scratch.tokens.clear();
    scratch.offsets.clear();
    // The key encode() found the stretch by in this cache (the same bytes, start and options).
    scratch.key = options.segment_cache != nullptr ? s.cache_key : std::nullopt;
  }
  // The cache holds the stretch's encoding as encode() made it: its offsets, searched in place,
  // give the answer without a copy of them.
  if (scratch.key) {
    if (const auto n = options.segment_cache->tokens_through(*scratch.key, offset - s.byte_begin)) {
      return *n == 0 ? before : s.token_begin + *n - 1;
    }
    scratch.key.reset();  // let go since: encoded once more, below
  }
  if (scratch.tokens.empty()) {
    EncodeOptions plain = options;
    plain.stretches = nullptr;
    encode_stretch(text, s.byte_begin, s.byte_end, plain, scratch.tokens, scratch.offsets);
  }
  const auto it = std::upper_bound(scratch.offsets.begin(), scratch.offsets.end(), offset);
  if (it == scratch.offsets.begin()) return before;
  return s.token_begin + static_cast<std::size_t>(it - scratch.offsets.begin()) - 1;
}

}  // namespace prefixgate::canon
