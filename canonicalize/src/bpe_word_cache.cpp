#include "bpe_word_cache.h"

#include <xxhash.h>

#include <algorithm>

namespace prefixgate::canon::internal {

std::size_t WordCache::Hash::operator()(std::string_view s) const {
  return static_cast<std::size_t>(XXH3_64bits(s.data(), s.size()));
}

WordCache& WordCache::for_tokenizer(std::uint64_t identity) {
  thread_local std::array<WordCache, kSlots> slots;
  thread_local std::uint64_t clock = 0;
  ++clock;
  WordCache* victim = &slots[0];
  for (WordCache& slot : slots) {
    if (slot.used_ != 0 && slot.identity_ == identity) {
      slot.used_ = clock;
      return slot;
    }
    if (slot.used_ < victim->used_) victim = &slot;
  }
  victim->clear();
  victim->identity_ = identity;
  victim->used_ = clock;
  return *victim;
}

std::optional<std::span<const TokenId>> WordCache::find(std::string_view word) {
  if (const auto it = young_.words.find(word); it != young_.words.end()) {
    return std::span<const TokenId>(young_.ids.data() + it->second.first, it->second.count);
  }
  const auto it = old_.words.find(word);
  if (it == old_.words.end()) return std::nullopt;
  const std::span<const TokenId> found(old_.ids.data() + it->second.first, it->second.count);
  // In use again: into the young generation. add() may drop the old one, so the ids go through a
  // copy (a token covers at least a byte: at most kMaxWordBytes of them).
  std::array<TokenId, kMaxWordBytes> copy;
  if (found.size() > copy.size()) return found;
  std::copy(found.begin(), found.end(), copy.begin());
  add(word, std::span<const TokenId>(copy.data(), found.size()));
  const Range r = young_.words.find(word)->second;
  return std::span<const TokenId>(young_.ids.data() + r.first, r.count);
}

void WordCache::add(std::string_view word, std::span<const TokenId> ids) {
  if (!cacheable(word)) return;
  if (young_.words.size() >= kGenerationWords) {
    std::swap(old_, young_);
    young_.clear();
  }
  const auto [it, inserted] = young_.words.try_emplace(
      std::string(word),
      Range{static_cast<std::uint32_t>(young_.ids.size()), static_cast<std::uint32_t>(ids.size())});
  if (inserted) young_.ids.insert(young_.ids.end(), ids.begin(), ids.end());
}

void WordCache::clear() {
  young_.clear();
  old_.clear();
}

}  // namespace prefixgate::canon::internal
