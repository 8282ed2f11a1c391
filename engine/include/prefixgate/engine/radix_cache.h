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
// Memory: node storage is one slot per pool page (a page is cached by at most one node), made
// up front, so inserts allocate no nodes; that is some 100 bytes per page next to the page's
// K/V of tens of kilobytes. The pool must outlive the cache.
//
//   engine::RadixCache cache(pool, 16, "builtin:tiny");
//   auto m = cache.match_prefix(salt, prompt);        // m.tokens cached tokens, m.pages
//   cache.lock(m.node);  ... cache.unlock(m.node);
//   cache.insert(salt, computed_tokens, their_pages); // after prefill/decode
//   cache.evict(pages_needed);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
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
  bool parent_is_root = false;    // kStored: the first block of its salt's chain
  std::vector<TokenId> tokens;    // kStored: the block's token ids (vLLM-format events carry them)
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
  // The tokens match_prefix would return, without touching anything (for load reports).
  std::size_t cached_prefix_tokens(std::string_view salt, std::span<const TokenId> tokens) const;
  // The same, for a caller that asks again about the same tokens (a waiting prompt, at every
  // load report): `probe` remembers where the last walk ended, and while that node is still
  // cached (its ancestors are then too: only leaves go) the walk continues from there rather
  // than hashing the whole prefix again. Start with a default PrefixProbe; the answer is always
  // what a walk from the root gives.
  struct PrefixProbe {
    const Node* node = nullptr;    // deepest matched node of the last walk
    std::uint32_t generation = 0;  // node's generation then
    std::size_t blocks = 0;        // blocks from the root to node
  };
  std::size_t cached_prefix_tokens(std::string_view salt, std::span<const TokenId> tokens,
                                   PrefixProbe& probe) const;

  // Pins `node` and its ancestors against eviction (counted: lock twice, unlock twice).
  // A null node (a match of nothing) is a no-op, so callers need not special-case it.
  void lock(Node* node);
  void unlock(Node* node);
  // lock(to) then unlock(from) when `to` is `from` or below it (a sequence moving its pin down
  // its own path), at the cost of the path between them.
  void move_lock(Node* from, Node* to);

  // Adds the full blocks of `tokens` under `salt`; block i is tokens [i * page_tokens,
  // (i + 1) * page_tokens) and its K/V is in pages[i]. A partial last block is not cached (its
  // page, if passed, is left alone). For blocks not cached yet the cache takes one new
  // reference on the caller's page; blocks already cached keep their existing page (the
  // caller's page is left alone). Returns the node of the last cached block (nullptr when none)
  // and replaces `cached_pages` with the page the cache holds for each block, so the caller can
  // switch to the shared copies. Caching stops at a block whose hash is taken by different
  // tokens (a 64-bit collision): `cached_pages` is then shorter than the block count and the
  // remaining blocks stay the caller's alone.
  //
  // `from` lets a sequence that grew continue where its last insert or match ended instead of
  // hashing its whole chain again: `from.node` must be a node the caller holds locked that
  // caches exactly the first `from.blocks` blocks of `tokens`. The walk then starts below it, so
  // the cost is that of the blocks after it, and `cached_pages` lists only those blocks' pages.
  // The result is the one a walk from the root would give.
  struct InsertFrom {
    Node* node = nullptr;  // nullptr: start at the salt's root
    std::size_t blocks = 0;
  };
  Node* insert(std::string_view salt, std::span<const TokenId> tokens,
               std::span<const PageId> pages, std::vector<PageId>* cached_pages, InsertFrom from);
  // (An overload, not a default argument: GCC cannot default a nested aggregate in its class.)
  Node* insert(std::string_view salt, std::span<const TokenId> tokens,
               std::span<const PageId> pages, std::vector<PageId>* cached_pages = nullptr) {
    return insert(salt, tokens, pages, cached_pages, InsertFrom{});
  }

  // Evicts least-recently-used unlocked leaves until `pages` pages went back to the pool or
  // nothing more can go. A leaf whose page someone else still holds is removed too (its parent
  // may be freeable) but not counted. Returns how many pages were freed.
  std::size_t evict(std::size_t pages);

  // Drops every unlocked node: one kCleared when that emptied the cache, else kRemoved each.
  void clear();

  std::size_t cached_pages() const { return node_count_; }
  // Pages eviction could free now: cached pages in no locked path and used by nobody else.
  // O(pool capacity): the pool's refcounts change behind the cache's back (sequences retain
  // and release directly), so there is no counter to keep.
  std::size_t evictable_pages() const;

  // Events since the last drain, oldest first.
  std::vector<CacheEvent> drain_events();
  // Every cached block, parents before children (for a kv_events snapshot); salts in byte
  // order, each salt's tree depth first.
  std::vector<CachedBlock> snapshot() const;

  // Checks every invariant (parent links, lock counts, page references, LRU membership);
  // returns a description of the first violation, or an empty string. For tests.
  std::string check_invariants() const;

 private:
  struct SaltRoot;
  // Heterogeneous lookup, so that finding a salt's root does not build a std::string.
  struct SaltHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  SaltRoot* find_root(std::string_view salt) const;
  Node* find_child(const Node* parent, std::uint64_t hash, std::span<const TokenId> block) const;
  void touch(Node* node, std::uint64_t now);
  void lru_add(Node* node);
  void lru_remove(Node* node);
  // Removes an unlocked leaf; returns whether its page went back to the pool.
  bool remove_leaf(Node* leaf);

  PagePool& pool_;
  std::size_t page_tokens_;
  std::string model_id_;
  std::vector<TokenId> slot_tokens_;  // [pool capacity, page_tokens]: each slot's block
  std::vector<Node> slots_;           // slots_[page] is the node caching `page`, if any
  // Every cached node by block hash. Chained hashes name a whole path, so one index serves all
  // parents and salts; a hit counts only if its parent and tokens match too.
  std::unordered_map<std::uint64_t, Node*> by_hash_;
  // Unlocked leaves by (last use, page): the eviction order. Pages are unique, so are keys.
  std::set<std::pair<std::uint64_t, PageId>> lru_;
  std::unordered_map<std::string, std::unique_ptr<SaltRoot>, SaltHash, std::equal_to<>> roots_;
  std::size_t node_count_ = 0;
  std::uint64_t clock_ = 0;  // LRU time: one tick per match or insert
  std::vector<CacheEvent> events_;
};

}  // namespace prefixgate::engine
