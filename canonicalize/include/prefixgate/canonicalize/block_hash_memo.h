// Block hashes of the token streams a thread hashed lately, so that a prompt sharing a prefix
// with one of them (the next turn of a conversation, another question after the same system
// prompt and tools) hashes only its blocks past that prefix.
//
// Why it is exact: a chained hash (block_hash.h) of block i depends only on the root and the
// tokens of blocks 0..i, so a prompt whose first k blocks of tokens equal a remembered stream's,
// under the same root and block size, has that stream's first k hashes. Which tokens are equal
// the memo finds by comparing them (memcmp, a few times faster than hashing them), never from
// a hash of them. (A caller that has the text the tokens came from does better with
// PromptMemo, prompt_memo.h, which also skips encoding the shared part.)
//
// Memory: kEntries streams of at most kMaxTokens tokens each, their hashes (8 / block size
// bytes per token) and their tokens (4 bytes each). A stream that shares at least half of a
// remembered one (the same conversation, one turn longer) takes that one's place; any other
// takes the least recently used one's. Not thread-safe: one per thread.
//
//   thread_local canon::BlockHashMemo memo;
//   memo.hashes(tokens, 16, root, out);   // == block_hashes(tokens, 16, root)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"

namespace prefixgate::canon {

class BlockHashMemo {
 public:
  static constexpr std::size_t kEntries = 8;
  static constexpr std::size_t kMaxTokens = std::size_t{1} << 20;

  // out = block_hashes(tokens, block_size, root), reusing out's capacity. Returns how many of
  // them came from the memo.
  std::size_t hashes(std::span<const TokenId> tokens, std::size_t block_size, std::uint64_t root,
                     std::vector<std::uint64_t>& out);

 private:
  struct Entry {
    std::uint64_t used = 0;  // clock_ at the last use; 0: empty
    std::uint64_t root = 0;
    std::size_t block_size = 0;
    std::vector<TokenId> tokens;  // whole blocks only
    std::vector<std::uint64_t> hashes;
  };
  struct Match;
  Match shared_by_tokens(const Entry& e, std::span<const TokenId> tokens, std::size_t blocks,
                         std::size_t block_size, std::size_t better_than) const;

  std::array<Entry, kEntries> entries_;
  std::uint64_t clock_ = 0;
};

}  // namespace prefixgate::canon
