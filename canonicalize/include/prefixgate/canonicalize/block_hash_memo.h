// Block hashes of the token streams a thread hashed lately, so that a prompt sharing a prefix
// with one of them (the next turn of a conversation, another question after the same system
// prompt and tools) hashes only its blocks past that prefix.
//
// Why it is exact: a chained hash (block_hash.h) of block i depends only on the root and the
// tokens of blocks 0..i, so a prompt whose first k blocks of tokens equal a remembered stream's,
// under the same root and block size, has that stream's first k hashes. Which tokens are equal
// the memo finds in one of two ways, never from a hash of them:
//   - from the tokens: compared with memcmp, a few times faster than hashing them;
//   - from the text they were encoded from, when the caller gives it with the encoding's
//     stretches (tokenizer.h): a stretch between added tokens encodes to tokens that depend only
//     on its bytes, where it starts and the tokenizer (what the segment cache relies on too,
//     segment_cache.h), so every leading stretch that both encodings list alike, over the same
//     bytes, has the same tokens. Taken where the text is the fewer bytes: a quarter of the
//     byte tokenizer's tokens' bytes (a BPE tokenizer's prose, four to six bytes a token, is
//     compared by its tokens).
//
// Memory: kEntries streams of at most kMaxTokens tokens each, their hashes (8 / block size
// bytes per token) and their tokens (4 bytes each) or their text and stretches copied. A stream
// that shares at least half of a remembered one (the same conversation, one turn longer) takes
// that one's place; any other takes the least recently used one's. Not thread-safe: one per
// thread.
//
//   thread_local canon::BlockHashMemo memo;
//   memo.hashes(tokens, 16, root, out);   // == block_hashes(tokens, 16, root)
//   memo.hashes({tokens, text, stretches, tokenizer->identity()}, 16, root, out);   // the same
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

class BlockHashMemo {
 public:
  static constexpr std::size_t kEntries = 8;
  static constexpr std::size_t kMaxTokens = std::size_t{1} << 20;

  // Tokens with the text that `tokenizer` encoded them from and the encoding's stretches.
  struct EncodedText {
    std::span<const TokenId> tokens;
    std::string_view text;
    std::span<const EncodedStretch> stretches;
    // Tokenizer::identity(), and whatever else changes how a stretch encodes (parse_special),
    // folded in: texts are compared only with texts encoded alike.
    std::uint64_t tokenizer = 0;
  };

  // out = block_hashes(tokens, block_size, root), reusing out's capacity. Returns how many of
  // them came from the memo.
  std::size_t hashes(std::span<const TokenId> tokens, std::size_t block_size, std::uint64_t root,
                     std::vector<std::uint64_t>& out);
  // The same, comparing text and stretches instead of tokens where the text is the fewer
  // bytes. `stretches` must cover the tokens in order, as encode() lists them; without any (or
  // where the tokens are fewer bytes) it compares the tokens.
  std::size_t hashes(const EncodedText& in, std::size_t block_size, std::uint64_t root,
                     std::vector<std::uint64_t>& out);

 private:
  struct Entry {
    std::uint64_t used = 0;  // clock_ at the last use; 0: empty
    std::uint64_t root = 0;
    std::size_t block_size = 0;
    bool by_text = false;
    std::vector<TokenId> tokens;  // !by_text: whole blocks only
    std::uint64_t tokenizer = 0;  // by_text: the encoding
    std::string text;
    std::vector<EncodedStretch> stretches;
    std::vector<std::uint64_t> hashes;
  };
  struct Match;
  Match shared_by_tokens(const Entry& e, std::span<const TokenId> tokens, std::size_t blocks,
                         std::size_t block_size, std::size_t better_than) const;
  Match shared_by_text(const Entry& e, const EncodedText& in, std::size_t blocks,
                       std::size_t block_size, std::size_t better_than_stretches) const;

  std::array<Entry, kEntries> entries_;
  std::uint64_t clock_ = 0;
};

}  // namespace prefixgate::canon
