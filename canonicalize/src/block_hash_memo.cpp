#include "prefixgate/canonicalize/block_hash_memo.h"

#include <algorithm>
#include <cstring>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"

namespace prefixgate::canon {
namespace {

// A remembered text longer than this is not kept (the token bound's bytes, as text).
constexpr std::size_t kMaxTextBytes = BlockHashMemo::kMaxTokens * sizeof(TokenId);

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

bool same_record(const EncodedStretch& a, const EncodedStretch& b) {
  return a.byte_begin == b.byte_begin && a.byte_end == b.byte_end &&
         a.token_begin == b.token_begin && a.token_end == b.token_end &&
         a.added_token == b.added_token;
}

// Whether stretch i of both encodings is listed alike over the same bytes: then its tokens are
// the same (the header says why).
bool same_stretch(std::string_view text_a, std::span<const EncodedStretch> a,
                  std::string_view text_b, std::span<const EncodedStretch> b, std::size_t i) {
  const EncodedStretch& s = a[i];
  if (!same_record(s, b[i]) || s.byte_end > text_a.size() || s.byte_end > text_b.size()) {
    return false;
  }
  const std::size_t n = s.byte_end - s.byte_begin;
  return n == 0 || std::memcmp(text_a.data() + s.byte_begin, text_b.data() + s.byte_begin, n) == 0;
}

// Whether the stretches cover the tokens from the first to the last, in order, within the text:
// what the text comparison needs. An encoding that added tokens outside any stretch is compared
// by its tokens.
bool covers(const BlockHashMemo::EncodedText& in) {
  if (in.stretches.empty() || in.stretches.front().token_begin != 0 ||
      in.stretches.back().token_end != in.tokens.size()) {
    return false;
  }
  std::size_t token = 0;
  std::size_t byte = 0;
  for (const EncodedStretch& s : in.stretches) {
    if (s.token_begin != token || s.token_end < s.token_begin || s.byte_begin != byte ||
        s.byte_end < s.byte_begin || s.byte_end > in.text.size()) {
      return false;
    }
    token = s.token_end;
    byte = s.byte_end;
  }
  return true;
}

}  // namespace

struct BlockHashMemo::Match {
  std::size_t blocks = 0;     // leading blocks shared
  std::size_t stretches = 0;  // by text: leading stretches shared
  std::size_t bytes = 0;      // by text: the bytes they span
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

BlockHashMemo::Match BlockHashMemo::shared_by_text(const Entry& e, const EncodedText& in,
                                                   std::size_t blocks, std::size_t block_size,
                                                   std::size_t better_than_stretches) const {
  const std::span<const EncodedStretch> mine(e.stretches);
  const std::size_t n = std::min(in.stretches.size(), mine.size());
  // As for tokens: the stretch after the best entry's shared ones rules most entries out.
  if (n <= better_than_stretches ||
      !same_stretch(in.text, in.stretches, e.text, mine, better_than_stretches)) {
    return {};
  }
  std::size_t i = 0;
  while (i < n && same_stretch(in.text, in.stretches, e.text, mine, i)) ++i;
  if (i == 0) return {};
  const EncodedStretch& last = in.stretches[i - 1];
  return Match{.blocks = std::min({last.token_end / block_size, blocks, e.hashes.size()}),
               .stretches = i,
               .bytes = last.byte_end};
}

std::size_t BlockHashMemo::hashes(std::span<const TokenId> tokens, std::size_t block_size,
                                  std::uint64_t root, std::vector<std::uint64_t>& out) {
  return hashes(EncodedText{.tokens = tokens, .text = {}, .stretches = {}, .tokenizer = 0},
                block_size, root, out);
}

std::size_t BlockHashMemo::hashes(const EncodedText& in, std::size_t block_size, std::uint64_t root,
                                  std::vector<std::uint64_t>& out) {
  PG_DCHECK(block_size > 0);
  // The text where it is the fewer bytes (the byte tokenizer's four bytes a byte; a BPE
  // tokenizer's prose runs four to six bytes a token, and compares faster by its tokens).
  const bool by_text = in.text.size() < in.tokens.size() * sizeof(TokenId) && covers(in);
  const std::size_t blocks = in.tokens.size() / block_size;
  ++clock_;
  Entry* best = nullptr;
  Match best_match;
  for (Entry& e : entries_) {
    if (e.used == 0 || e.root != root || e.block_size != block_size || e.by_text != by_text ||
        (by_text && e.tokenizer != in.tokenizer)) {
      continue;
    }
    const Match m = by_text ? shared_by_text(e, in, blocks, block_size, best_match.stretches)
                            : shared_by_tokens(e, in.tokens, blocks, block_size, best_match.blocks);
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
    parent = chain_block_hash(parent, in.tokens.subspan(i * block_size, block_size));
    out.push_back(parent);
  }
  if (blocks == 0 || blocks * block_size > kMaxTokens || reused == blocks ||
      (by_text && in.text.size() > kMaxTextBytes)) {
    return reused;
  }
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
  slot->by_text = by_text;
  // Replacing the stream it shares with, only what follows the shared part is copied: the rest
  // already holds it (an agent's turn copies its new turn, not the whole conversation again).
  if (by_text) {
    const std::size_t kept_bytes = replacing ? best_match.bytes : 0;
    slot->tokenizer = in.tokenizer;
    slot->text.resize(kept_bytes);
    slot->text.append(in.text.substr(kept_bytes));
    slot->stretches.assign(in.stretches.begin(), in.stretches.end());
    slot->tokens.clear();
  } else {
    const std::size_t kept = replacing ? reused : 0;
    slot->tokens.resize(kept * block_size);
    slot->tokens.insert(slot->tokens.end(),
                        in.tokens.begin() + static_cast<std::ptrdiff_t>(kept * block_size),
                        in.tokens.begin() + static_cast<std::ptrdiff_t>(blocks * block_size));
    slot->text.clear();
    slot->stretches.clear();
  }
  const std::size_t kept = replacing ? reused : 0;
  slot->hashes.resize(kept);
  slot->hashes.insert(slot->hashes.end(), out.begin() + static_cast<std::ptrdiff_t>(kept),
                      out.end());
  return reused;
}

}  // namespace prefixgate::canon
