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

std::optional<std::span<const TokenId>> WordCache::find(std::string_view word) const {
  const auto it = words_.find(word);
  if (it == words_.end()) return std::nullopt;
  return std::span<const TokenId>(ids_.data() + it->second.first, it->second.count);
}

void WordCache::add(std::string_view word, std::span<const TokenId> ids) {
  if (!cacheable(word)) return;
  if (words_.size() >= kMaxWords) clear();
  const auto [it, inserted] = words_.try_emplace(
      std::string(word),
      Range{static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint32_t>(ids.size())});
  if (inserted) ids_.insert(ids_.end(), ids.begin(), ids.end());
}

void WordCache::clear() {
  words_.clear();
  ids_.clear();
}

}  // namespace prefixgate::canon::internal
