// The prefix cache: a radix tree over token ids at page granularity, per cache salt.
//
// Each node is one full page of tokens (`page_tokens`, default 16, the block size of
// canonicalize/'s block hashes) and holds the page's id and its chained block hash. A path from
// a salt's root spells a cached prefix. Matching compares token ids; the hash is the child key
// and what KV-cache events report, never trusted alone.
//
// Ownership: the cache holds one reference on every page it stores. A sequence that reuses a
// cached prefix locks the deepest matched node (pinning it and its ancestors against eviction)
// and retains the pages it reads. Eviction removes least-recently-used unlocked leaves.
//
//   engine::RadixCache cache(pool, 16, "builtin:tiny");
//   auto m = cache.match_prefix(salt, prompt);        // m.tokens cached tokens, m.pages
//   cache.lock(m.node);  ... cache.unlock(m.node);
//   cache.insert(salt, computed_tokens, their_pages); // after prefill/decode
//   cache.evict(pages_needed);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "prefixgate/canonicalize/tokenizer.h"
#include "prefixgate/engine/page_pool.h"

namespace prefixgate::engine {

using canon::TokenId;

// A change to the cache's contents, in the order it happened. These become /v1/kv_events.
struct CacheEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  std::uint64_t block_hash = 0;   // kStored, kRemoved
  std::uint64_t parent_hash = 0;  // kStored: the parent block's hash, or the salt's root hash
  std::string salt;               // kStored, kRemoved
};

// A cached block as a snapshot lists it.
struct CachedBlock {
  std::uint64_t block_hash = 0;
  std::uint64_t parent_hash = 0;
  std::string salt;
};

class RadixCache {
 public:
  struct Node;  // opaque outside the implementation

  struct Match {
    std::vector<PageId> pages;  // pages of the matched full blocks, in order
    std::size_t tokens = 0;     // pages.size() * page_tokens
    Node* node = nullptr;       // deepest matched node, or nullptr when nothing matched
  };

  RadixCache(PagePool& pool, std::size_t page_tokens, std::string model_id);
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  std::size_t page_tokens() const { return page_tokens_; }

  // The longest cached prefix of `tokens` (full pages only) under `salt`. Marks the matched
  // nodes as recently used. Does not lock or retain anything.
  Match match_prefix(std::string_view salt, std::span<const TokenId> tokens);

  // Pins `node` and its ancestors against eviction (counted: lock twice, unlock twice).
  void lock(Node* node);
  void unlock(Node* node);

  // Adds the full pages of `tokens` (tokens.size() == pages.size() * page_tokens) under `salt`.
  // For blocks not cached yet the cache takes one new reference on the caller's page; blocks
  // already cached keep their existing page (the caller's page is left alone). Returns the node
  // of the last block (nullptr for no pages) and, in `cached_pages`, the page the cache holds
  // for each block, so the caller can switch to the shared copies.
  Node* insert(std::string_view salt, std::span<const TokenId> tokens,
               std::span<const PageId> pages, std::vector<PageId>* cached_pages = nullptr);

  // Evicts least-recently-used unlocked leaves until `pages` pages went back to the pool or
  // nothing more can go. Returns how many pages were freed.
  std::size_t evict(std::size_t pages);

  // Drops every unlocked node (kCleared when the whole cache emptied).
  void clear();

  std::size_t cached_pages() const { return node_count_; }
  // Pages eviction could free now: cached pages in no locked path and used by nobody else.
  std::size_t evictable_pages() const;

  // Events since the last drain, oldest first.
  std::vector<CacheEvent> drain_events();
  // Every cached block, parents before children (for a kv_events snapshot).
  std::vector<CachedBlock> snapshot() const;

  // Checks every invariant (parent links, lock counts, page references, LRU membership);
  // returns a description of the first violation, or an empty string. For tests.
  std::string check_invariants() const;

 private:
  struct SaltRoot;
  Node* find_child(Node* parent, std::uint64_t hash, std::span<const TokenId> block) const;
  void touch(Node* node);
  void remove_leaf(Node* leaf);

  PagePool& pool_;
  std::size_t page_tokens_;
  std::string model_id_;
  std::unordered_map<std::string, std::unique_ptr<SaltRoot>> roots_;
  std::size_t node_count_ = 0;
  std::uint64_t clock_ = 0;  // LRU time
  std::vector<CacheEvent> events_;
};

}  // namespace prefixgate::engine
