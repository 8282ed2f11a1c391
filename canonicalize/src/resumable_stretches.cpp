// Tokenizer::resumable_stretches: where an encoding of a text that shares a prefix with one
// encoded before can pick up, so that only what follows is encoded (prompt_memo.h).
#include <algorithm>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

std::size_t Tokenizer::resumable_stretches(std::span<const EncodedStretch> stretches,
                                           std::span<const TokenId> tokens,
                                           std::size_t shared) const {
  // encode() walks the text left to right. Where it finds an added token, and that none starts
  // before it, it decided from the bytes up to the token's end plus the lookahead; the tokens of
  // the stretches before it depend only on their own bytes. So an added token that ends at
  // least a lookahead before the shared bytes do ends, in any text sharing them, the same
  // stretches, and after it (unless it strips the whitespace that follows, which depends on
  // bytes past it) encode() stands where it would start afresh.
  const std::size_t lookahead = added_token_lookahead();
  if (shared <= lookahead) return 0;
  const std::size_t decided = shared - lookahead;
  std::size_t k = static_cast<std::size_t>(
      std::upper_bound(stretches.begin(), stretches.end(), decided,
                       [](std::size_t at, const EncodedStretch& s) { return at < s.byte_end; }) -
      stretches.begin());
  for (; k > 0; --k) {
    const EncodedStretch& s = stretches[k - 1];
    if (!s.added_token || s.token_end != s.token_begin + 1 || s.token_begin >= tokens.size()) {
      continue;
    }
    if (!takes_space_after(tokens[s.token_begin])) return k;
  }
  return 0;
}

}  // namespace prefixgate::canon
