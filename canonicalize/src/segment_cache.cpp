#include "prefixgate/canonicalize/segment_cache.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

#include "bulk_hash.h"

namespace prefixgate::canon {
namespace {

// What an entry costs beyond its arrays: the list node, the index node and bucket, the key.
constexpr std::size_t kEntryOverheadBytes = 96;

struct KeyHash {
  std::size_t operator()(const SegmentCache::Key& k) const { return k.low; }
};

}  // namespace

struct SegmentCache::Shard {
  struct Entry {
    Key key;
    std::size_t token_count = 0;
    // The tokens, then their offsets relative to the segment's start (2 x token_count).
    // Allocated without zero-filling: every element is written before the entry is stored.
    std::unique_ptr<std::uint32_t[]> data;
    std::size_t charged = 0;
  };
  std::mutex mu;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index;
  std::size_t bytes = 0;
};

SegmentCache::SegmentCache(SegmentCacheOptions options) : options_(options) {
  options_.shards = std::max<std::size_t>(options_.shards, 1);
  shards_ = std::make_unique<Shard[]>(options_.shards);
}

SegmentCache::~SegmentCache() = default;

SegmentCache::Key SegmentCache::key(std::uint64_t tokenizer_identity, std::uint32_t flags,
                                    std::string_view segment) {
  const internal::Hash128 h =
      internal::bulk_hash128(segment, tokenizer_identity ^ (std::uint64_t{flags} << 56));
  return Key{.low = h.low, .high = h.high};
}

SegmentCache::Shard& SegmentCache::shard_for(const Key& key) {
  return shards_[key.high % options_.shards];
}

bool SegmentCache::lookup(const Key& key, std::size_t segment_bytes, std::vector<TokenId>& tokens,
                          std::vector<std::size_t>* offsets, std::size_t base) {
  Shard& shard = shard_for(key);
  {
    std::lock_guard lock(shard.mu);
    const auto it = shard.index.find(key);
    if (it != shard.index.end()) {
      shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
      const Shard::Entry& e = *it->second;
      const std::uint32_t* data = e.data.get();
      // A local count: the loop's stores (size_t) could alias e.token_count, which would keep
      // the compiler from vectorizing it.
      const std::size_t n = e.token_count;
      tokens.insert(tokens.end(), data, data + n);
      if (offsets != nullptr) {
        // resize() zero-fills, but in one memset, and the loop below vectorizes; inserting from
        // a transforming range wrote one element at a time, several times slower.
        const std::size_t old = offsets->size();
        offsets->resize(old + n);
        std::size_t* o = offsets->data() + old;
        const std::uint32_t* rel = data + n;
        for (std::size_t i = 0; i < n; ++i) o[i] = base + rel[i];
      }
      hits_.fetch_add(1, std::memory_order_relaxed);
      hit_bytes_.fetch_add(segment_bytes, std::memory_order_relaxed);
      return true;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  miss_bytes_.fetch_add(segment_bytes, std::memory_order_relaxed);
  return false;
}

std::optional<std::size_t> SegmentCache::tokens_through(const Key& key, std::size_t offset) {
  Shard& shard = shard_for(key);
  std::lock_guard lock(shard.mu);
  const auto it = shard.index.find(key);
  if (it == shard.index.end()) return std::nullopt;
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  const Shard::Entry& e = *it->second;
  // Offsets never decrease along a segment, and each fits in 32 bits (insert() checks).
  const std::uint32_t* rel = e.data.get() + e.token_count;
  if (offset >= UINT32_MAX) return e.token_count;
  return static_cast<std::size_t>(
      std::upper_bound(rel, rel + e.token_count, static_cast<std::uint32_t>(offset)) - rel);
}

void SegmentCache::insert(const Key& key, std::size_t segment_bytes,
                          std::span<const TokenId> tokens, std::span<const std::size_t> offsets,
                          std::size_t base) {
  if (tokens.size() != offsets.size() || segment_bytes > UINT32_MAX) return;
  Shard::Entry e{.key = key,
                 .token_count = tokens.size(),
                 .data = std::make_unique_for_overwrite<std::uint32_t[]>(2 * tokens.size())};
  std::copy(tokens.begin(), tokens.end(), e.data.get());
  std::uint32_t* rel = e.data.get() + tokens.size();
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    // An offset outside the segment would come back wrong at another position: not cached.
    if (offsets[i] < base || offsets[i] - base > segment_bytes) return;
    rel[i] = static_cast<std::uint32_t>(offsets[i] - base);
  }
  e.charged = 2 * tokens.size() * sizeof(std::uint32_t) + kEntryOverheadBytes;
  const std::size_t shard_budget = options_.max_bytes / options_.shards;
  if (e.charged > shard_budget) return;

  Shard& shard = shard_for(key);
  std::list<Shard::Entry> evicted;  // freed after the lock is released
  {
    std::lock_guard lock(shard.mu);
    if (shard.index.count(key) != 0) return;
    while (shard.bytes + e.charged > shard_budget && !shard.lru.empty()) {
      auto last = std::prev(shard.lru.end());
      shard.bytes -= last->charged;
      bytes_.fetch_sub(last->charged, std::memory_order_relaxed);
      entries_.fetch_sub(1, std::memory_order_relaxed);
      evictions_.fetch_add(1, std::memory_order_relaxed);
      shard.index.erase(last->key);
      evicted.splice(evicted.end(), shard.lru, last);
    }
    const std::size_t charged = e.charged;
    shard.lru.push_front(std::move(e));
    shard.index.emplace(key, shard.lru.begin());
    shard.bytes += charged;
    bytes_.fetch_add(charged, std::memory_order_relaxed);
    entries_.fetch_add(1, std::memory_order_relaxed);
  }
}

SegmentCacheStats SegmentCache::stats() const {
  return SegmentCacheStats{.hits = hits_.load(std::memory_order_relaxed),
                           .misses = misses_.load(std::memory_order_relaxed),
                           .evictions = evictions_.load(std::memory_order_relaxed),
                           .hit_bytes = hit_bytes_.load(std::memory_order_relaxed),
                           .miss_bytes = miss_bytes_.load(std::memory_order_relaxed),
                           .bytes = bytes_.load(std::memory_order_relaxed),
                           .entries = entries_.load(std::memory_order_relaxed)};
}

}  // namespace prefixgate::canon
