#include "prefixgate/canonicalize/block_hash_memo.h"

#include <algorithm>
#include <cstring>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"

namespace prefixgate::canon {
namespace {

// Leading blocks of `blocks` blocks that `a` and `b` share. memcmp over runs of blocks, then
// block by block within the run that differs: a shared prefix of n tokens costs about one pass
// of memcmp over it.
std::size_t common_blocks(const TokenId* a, const TokenId* b, std::size_t blocks,
                          std::size_t block_size) {
  constexpr std::size_t kRunBlocks = 64;
  const std::size_t block_bytes = block_size * sizeof(TokenId);
  std::size_t i = 0;
  while (i < blocks) {
    const std::size_t run = std::min(kRunBlocks, blocks - i);
    const std::size_t offset = i * block_size;
    if (std::memcmp(a + offset, b + offset, run * block_bytes) == 0) {
      i += run;
      continue;
    }
    for (std::size_t j = 0; j < run; ++j, ++i) {
      if (std::memcmp(a + i * block_size, b + i * block_size, block_bytes) != 0) return i;
    }
    PG_DCHECK(false, "common_blocks: a run differs but none of its blocks does");
    return i;
  }
  return i;
}

}  // namespace

struct BlockHashMemo::Match {
  std::size_t blocks = 0;  // leading blocks shared
};

BlockHashMemo::Match BlockHashMemo::shared_by_tokens(const Entry& e,
                                                     std::span<const TokenId> tokens,
                                                     std::size_t blocks, std::size_t block_size,
                                                     std::size_t better_than) const {
  const std::size_t comparable = std::min(blocks, e.hashes.size());
  // To do better than `better_than` blocks, e must share the block after them too: one block
  // compared rules out most entries (other conversations) before their whole shared prefix is.
  if (comparable <= better_than ||
      std::memcmp(tokens.data() + better_than * block_size,
                  e.tokens.data() + better_than * block_size, block_size * sizeof(TokenId)) != 0) {
    return {};
  }
  return Match{.blocks = common_blocks(tokens.data(), e.tokens.data(), comparable, block_size)};
}

std::size_t BlockHashMemo::hashes(std::span<const TokenId> tokens, std::size_t block_size,
                                  std::uint64_t root, std::vector<std::uint64_t>& out) {
  PG_DCHECK(block_size > 0);
  const std::size_t blocks = tokens.size() / block_size;
  ++clock_;
  Entry* best = nullptr;
  Match best_match;
  for (Entry& e : entries_) {
    if (e.used == 0 || e.root != root || e.block_size != block_size) continue;
    const Match m = shared_by_tokens(e, tokens, blocks, block_size, best_match.blocks);
    if (m.blocks > best_match.blocks) {
      best = &e;
      best_match = m;
    }
  }
  const std::size_t reused = best_match.blocks;
  out.clear();
  out.reserve(blocks);
  if (best != nullptr) {
    best->used = clock_;
    out.assign(best->hashes.begin(), best->hashes.begin() + static_cast<std::ptrdiff_t>(reused));
  }
  std::uint64_t parent = reused > 0 ? out.back() : root;
  for (std::size_t i = reused; i < blocks; ++i) {
    parent = chain_block_hash(parent, tokens.subspan(i * block_size, block_size));
    out.push_back(parent);
  }
  if (blocks == 0 || blocks * block_size > kMaxTokens || reused == blocks) return reused;
  // The stream shares most of the remembered one (the conversation grew by a turn, or its last
  // turn was sent again changed): it replaces it, so one conversation holds one place. Otherwise
  // (nothing shared, or a system prompt only) it takes the least recently used place.
  Entry* slot = best;
  if (best == nullptr || 2 * reused < best->hashes.size()) {
    slot = &*std::min_element(entries_.begin(), entries_.end(),
                              [](const Entry& a, const Entry& b) { return a.used < b.used; });
  }
  const bool replacing = slot == best;
  slot->used = clock_;
  slot->root = root;
  slot->block_size = block_size;
  // Replacing the stream it shares with, only what follows the shared part is copied: the rest
  // already holds it (an agent's turn copies its new turn, not the whole conversation again).
  const std::size_t kept = replacing ? reused : 0;
  slot->tokens.resize(kept * block_size);
  slot->tokens.insert(slot->tokens.end(),
                      tokens.begin() + static_cast<std::ptrdiff_t>(kept * block_size),
                      tokens.begin() + static_cast<std::ptrdiff_t>(blocks * block_size));
  slot->hashes.resize(kept);
  slot->hashes.insert(slot->hashes.end(), out.begin() + static_cast<std::ptrdiff_t>(kept),
                      out.end());
  return reused;
}

}  // namespace prefixgate::canon
