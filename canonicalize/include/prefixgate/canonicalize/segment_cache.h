// A bounded LRU of text segment -> tokens, so that a prompt that repeats what earlier requests
// sent (a system prompt, the tools block, every earlier turn of a conversation) is tokenized
// only where it is new.
//
// Why it is exact: a tokenizer splits its input at the special (added) tokens it recognises
// before it normalizes, pre-tokenizes or merges anything, and no later step looks across that
// split. The tokens of the stretch of text between two special tokens therefore depend only on
// that stretch's bytes, the tokenizer, and the few options that change how a stretch is read
// (special-token parsing, and whether the stretch starts the text: SentencePiece's
// prepend_scheme "first"). Both tokenizers look each stretch up here, keyed by a 128-bit XXH3 of
// its bytes seeded with the tokenizer's identity (tokenizer.h) and those options, and store what
// they computed on a miss. Entries hold the tokens and their byte offsets relative to the
// stretch, so a hit gives exactly the ids and offsets an uncached encode gives
// (tests/canonicalize/segment_cache_test.cpp checks that over random conversations).
//
// Memory: every entry is charged its token and offset arrays plus a fixed overhead for its
// index and list nodes; the least recently used entries go first once `max_bytes` is reached.
// Stretches shorter than `min_segment_bytes` are tokenized directly (a lookup would cost more
// than it saves). The cache is split into shards, each under its own mutex, so threads that
// tokenize at once rarely wait for each other; a shard holds max_bytes / shards.
//
//   canon::SegmentCache cache({.max_bytes = 64 << 20});
//   tokenizer->encode(rendered.text, ids, {.parse_special = true, .segment_cache = &cache});
//   cache.stats().hits;
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace prefixgate::canon {

using TokenId = std::uint32_t;

struct SegmentCacheOptions {
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t min_segment_bytes = 64;
  std::size_t shards = 16;
};

struct SegmentCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  std::uint64_t hit_bytes = 0;   // text bytes served from the cache
  std::uint64_t miss_bytes = 0;  // text bytes tokenized and stored
  std::size_t bytes = 0;         // memory charged to the entries now held
  std::size_t entries = 0;
};

class SegmentCache {
 public:
  struct Key {
    std::uint64_t low = 0;
    std::uint64_t high = 0;
    bool operator==(const Key&) const = default;
  };
  // What besides the bytes decides a stretch's tokens, folded into the key.
  enum Flags : std::uint32_t {
    kParseSpecial = 1,  // EncodeOptions::parse_special
    kTextStart = 2,     // the stretch starts the text
  };

  explicit SegmentCache(SegmentCacheOptions options = {});
  ~SegmentCache();
  SegmentCache(const SegmentCache&) = delete;
  SegmentCache& operator=(const SegmentCache&) = delete;

  static Key key(std::uint64_t tokenizer_identity, std::uint32_t flags, std::string_view segment);

  // On a hit appends the segment's tokens to `tokens` and, when given, their offsets plus
  // `base` (where the segment starts in the text) to `offsets`, and returns true.
  bool lookup(const Key& key, std::size_t segment_bytes, std::vector<TokenId>& tokens,
              std::vector<std::size_t>* offsets, std::size_t base);
  // How many of a cached segment's tokens have an offset (from the segment's start) of at most
  // `offset`, found in the entry without copying it out; nullopt when the segment is not held.
  // A question about an encoding already made, not an encode: it counts as no hit or miss.
  std::optional<std::size_t> tokens_through(const Key& key, std::size_t offset);
  // Stores a segment's tokens and their offsets in the text (`base` = where it starts); the
  // offsets must lie in [base, base + segment_bytes]. Replaces nothing already held.
  void insert(const Key& key, std::size_t segment_bytes, std::span<const TokenId> tokens,
              std::span<const std::size_t> offsets, std::size_t base);

  std::size_t min_segment_bytes() const { return options_.min_segment_bytes; }
  std::size_t max_bytes() const { return options_.max_bytes; }
  SegmentCacheStats stats() const;

 private:
  struct Shard;
  Shard& shard_for(const Key& key);

  SegmentCacheOptions options_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, evictions_{0}, hit_bytes_{0}, miss_bytes_{0};
  std::atomic<std::size_t> bytes_{0}, entries_{0};
};

}  // namespace prefixgate::canon
