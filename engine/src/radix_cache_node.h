// The radix cache's node layout, private to engine/src/ (radix_cache.cpp and its invariant
// checks). Tests include it as a seam: they may read a node, and the hash-collision test
// rewrites a node's tokens to stand for a different block under the same hash.
#pragma once

#include <cstdint>
#include <string>

#include "prefixgate/engine/radix_cache.h"

namespace prefixgate::engine {

// One cached block (or, with parent == nullptr, a salt's root, which caches nothing). Children
// hang off an intrusive doubly linked sibling list: most nodes have one child, so a map per
// node would cost more than it saves, and lookups go through the cache-wide hash index anyway.
struct RadixCache::Node {
  Node* parent = nullptr;
  SaltRoot* salt_root = nullptr;
  Node* first_child = nullptr;
  Node* prev_sibling = nullptr;
  Node* next_sibling = nullptr;
  TokenId* tokens = nullptr;  // page_tokens ids in the cache's slot storage; null at a root
  std::uint64_t hash = 0;     // chain_block_hash(parent->hash, tokens); the salt root hash
  // RadixCache::clock_ at the last match or insert through it. An insert that starts below a
  // locked node (InsertFrom) leaves that node's ancestors older than it: they are locked, so not
  // in the LRU, and unlock and eviction carry the newer time up before one can be a leaf there.
  std::uint64_t last_used = 0;
  std::uint32_t child_count = 0;
  std::uint32_t lock_count = 0;    // active locks on this node or any descendant
  std::uint32_t direct_locks = 0;  // active locks naming this node itself
  PageId page = 0;
  std::uint32_t generation = 0;  // bumped when the slot's node is removed (PrefixProbe)
  bool cached = false;           // a slot in use (always false at a root)
  bool in_lru = false;           // listed in RadixCache::lru_: cached, unlocked, childless
};

struct RadixCache::SaltRoot {
  std::string salt;
  Node node;  // node.hash = canon::block_hash_root(model_id, salt)
};

}  // namespace prefixgate::engine
