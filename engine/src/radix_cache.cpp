// The prefix cache's operations: matching, locking, inserting and evicting. The invariant
// checker and the snapshot walk are in radix_cache_walk.cpp.
#include "prefixgate/engine/radix_cache.h"

#include <algorithm>
#include <limits>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/block_hash.h"
#include "radix_cache_node.h"

namespace prefixgate::engine {
namespace {

using Node = RadixCache::Node;

bool same_tokens(const Node& node, std::span<const TokenId> block) {
  return std::equal(block.begin(), block.end(), node.tokens);
}

void link_child(Node* parent, Node* child) {
  child->parent = parent;
  child->prev_sibling = nullptr;
  child->next_sibling = parent->first_child;
  if (parent->first_child != nullptr) parent->first_child->prev_sibling = child;
  parent->first_child = child;
  ++parent->child_count;
}

void unlink_child(Node* child) {
  Node* parent = child->parent;
  if (child->prev_sibling != nullptr) {
    child->prev_sibling->next_sibling = child->next_sibling;
  } else {
    parent->first_child = child->next_sibling;
  }
  if (child->next_sibling != nullptr) child->next_sibling->prev_sibling = child->prev_sibling;
  --parent->child_count;
}

bool is_root(const Node* node) {
  return node->parent == nullptr;
}

// Blocks from the salt's root to `node`; for debug checks.
[[maybe_unused]] std::size_t depth(const Node* node) {
  std::size_t blocks = 0;
  for (; !is_root(node); node = node->parent) ++blocks;
  return blocks;
}

}  // namespace

RadixCache::RadixCache(PagePool& pool, std::size_t page_tokens, std::string model_id)
    : pool_(pool),
      page_tokens_(page_tokens),
      model_id_(std::move(model_id)),
      slot_tokens_(pool.capacity() * page_tokens),
      slots_(pool.capacity()) {
  PG_DCHECK(page_tokens_ > 0);
  PG_DCHECK(pool.capacity() <= std::numeric_limits<PageId>::max());
  for (std::size_t page = 0; page < slots_.size(); ++page) {
    slots_[page].tokens = slot_tokens_.data() + page * page_tokens_;
    slots_[page].page = static_cast<PageId>(page);
  }
  // Every node is indexed by hash, and there are at most as many nodes as pages.
  by_hash_.reserve(pool.capacity());
}

RadixCache::~RadixCache() {
  // Give the cache's references back so the pool's accounting stays exact for its other users.
  for (const Node& slot : slots_) {
    if (slot.cached) pool_.release(slot.page);
  }
}

RadixCache::SaltRoot* RadixCache::find_root(std::string_view salt) const {
  auto it = roots_.find(salt);
  return it == roots_.end() ? nullptr : it->second.get();
}

RadixCache::Node* RadixCache::find_child(const Node* parent, std::uint64_t hash,
                                         std::span<const TokenId> block) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return nullptr;
  Node* child = it->second;
  // Equal hashes under another parent, or with other tokens, are a collision: a miss, never a
  // page of someone else's K/V.
  if (child->parent != parent || !same_tokens(*child, block)) return nullptr;
  return child;
}

void RadixCache::lru_add(Node* node) {
  PG_DCHECK(node->cached && !node->in_lru && node->child_count == 0 && node->lock_count == 0);
  lru_.emplace(node->last_used, node->page);
  node->in_lru = true;
}

void RadixCache::lru_remove(Node* node) {
  PG_DCHECK(node->in_lru);
  lru_.erase({node->last_used, node->page});
  node->in_lru = false;
}

void RadixCache::touch(Node* node, std::uint64_t now) {
  if (!node->in_lru) {
    node->last_used = now;
    return;
  }
  // Re-key the set entry in place rather than free and allocate a set node.
  auto handle = lru_.extract({node->last_used, node->page});
  PG_DCHECK(!handle.empty());
  node->last_used = now;
  handle.value().first = now;
  lru_.insert(std::move(handle));
}

RadixCache::Match RadixCache::match_prefix(std::string_view salt, std::span<const TokenId> tokens) {
  Match match;
  SaltRoot* root = find_root(salt);
  if (root == nullptr) return match;
  const std::size_t blocks = tokens.size() / page_tokens_;
  const std::uint64_t now = ++clock_;
  // One allocation instead of a dozen regrowths on a long hit (a 32k prompt is 2048 pages).
  match.pages.reserve(std::min(blocks, node_count_));
  Node* node = &root->node;
  for (std::size_t i = 0; i < blocks; ++i) {
    const auto block = tokens.subspan(i * page_tokens_, page_tokens_);
    Node* child = find_child(node, canon::chain_block_hash(node->hash, block), block);
    if (child == nullptr) break;
    touch(child, now);
    match.pages.push_back(child->page);
    node = child;
  }
  if (!is_root(node)) match.node = node;
  match.tokens = match.pages.size() * page_tokens_;
  return match;
}

std::size_t RadixCache::cached_prefix_tokens(std::string_view salt,
                                             std::span<const TokenId> tokens) const {
  const SaltRoot* root = find_root(salt);
  if (root == nullptr) return 0;
  const std::size_t blocks = tokens.size() / page_tokens_;
  const Node* node = &root->node;
  std::size_t i = 0;
  for (; i < blocks; ++i) {
    const auto block = tokens.subspan(i * page_tokens_, page_tokens_);
    const Node* child = find_child(node, canon::chain_block_hash(node->hash, block), block);
    if (child == nullptr) break;
    node = child;
  }
  return i * page_tokens_;
}

std::size_t RadixCache::cached_prefix_tokens(std::string_view salt, std::span<const TokenId> tokens,
                                             PrefixProbe& probe) const {
  const std::size_t blocks = tokens.size() / page_tokens_;
  const Node* node = probe.node;
  std::size_t i = probe.blocks;
  if (node == nullptr || node->generation != probe.generation || i > blocks) {
    const SaltRoot* root = find_root(salt);
    if (root == nullptr) {
      probe = {};
      return 0;
    }
    node = &root->node;
    i = 0;
  }
  for (; i < blocks; ++i) {
    const auto block = tokens.subspan(i * page_tokens_, page_tokens_);
    const Node* child = find_child(node, canon::chain_block_hash(node->hash, block), block);
    if (child == nullptr) break;
    node = child;
  }
  probe = is_root(node) ? PrefixProbe{} : PrefixProbe{node, node->generation, i};
  return i * page_tokens_;
}

void RadixCache::lock(Node* node) {
  if (node == nullptr) return;
  PG_DCHECK(node->cached);
  ++node->direct_locks;
  for (Node* n = node; !is_root(n); n = n->parent) {
    if (n->lock_count++ == 0 && n->in_lru) lru_remove(n);
  }
}

void RadixCache::unlock(Node* node) {
  if (node == nullptr) return;
  PG_DCHECK(node->cached && node->direct_locks > 0);
  --node->direct_locks;
  for (Node* n = node; !is_root(n); n = n->parent) {
    PG_DCHECK(n->lock_count > 0);
    if (--n->lock_count == 0 && n->child_count == 0) lru_add(n);
    // Brings up the use an InsertFrom below a locked node recorded there only. The parent has
    // a child, so it is not in the LRU and its key does not change.
    n->parent->last_used = std::max(n->parent->last_used, n->last_used);
  }
}

void RadixCache::move_lock(Node* from, Node* to) {
  if (from == to) return;
  if (from == nullptr) return lock(to);
  if (to == nullptr) return unlock(from);
  PG_DCHECK(from->cached && from->direct_locks > 0 && to->cached);
  --from->direct_locks;
  ++to->direct_locks;
  // `from` keeps its count (the lock is still below it); the nodes under it gain one.
  for (Node* n = to; n != from; n = n->parent) {
    PG_DCHECK(!is_root(n), "move_lock: `to` is not below `from`");
    if (n->lock_count++ == 0 && n->in_lru) lru_remove(n);
  }
}

RadixCache::Node* RadixCache::insert(std::string_view salt, std::span<const TokenId> tokens,
                                     std::span<const PageId> pages,
                                     std::vector<PageId>* cached_pages, InsertFrom from) {
  const std::size_t blocks = tokens.size() / page_tokens_;
  PG_DCHECK(pages.size() >= blocks);
  if (cached_pages != nullptr) cached_pages->clear();
  if (blocks == 0) return nullptr;

  const std::uint64_t now = ++clock_;
  Node* node = nullptr;
  if (from.node != nullptr) {
    PG_DCHECK(from.node->cached && from.node->lock_count > 0 && from.blocks <= blocks);
    PG_DCHECK(from.node->salt_root->salt == salt && depth(from.node) == from.blocks);
    PG_DCHECK(
        same_tokens(*from.node, tokens.subspan((from.blocks - 1) * page_tokens_, page_tokens_)));
    node = from.node;
    // Its ancestors keep their older time while it is locked (radix_cache_node.h).
    touch(node, now);
  } else {
    auto root_it = roots_.find(salt);
    if (root_it == roots_.end()) {
      auto created = std::make_unique<SaltRoot>();
      created->salt = std::string(salt);
      created->node.salt_root = created.get();
      created->node.hash = canon::block_hash_root(model_id_, salt);
      root_it = roots_.emplace(created->salt, std::move(created)).first;
    }
    node = &root_it->second->node;
  }
  SaltRoot& root = *node->salt_root;

  for (std::size_t i = from.node != nullptr ? from.blocks : 0; i < blocks; ++i) {
    const auto block = tokens.subspan(i * page_tokens_, page_tokens_);
    const std::uint64_t hash = canon::chain_block_hash(node->hash, block);
    auto [it, fresh] = by_hash_.try_emplace(hash, nullptr);
    Node* child = it->second;
    if (!fresh) {
      if (child->parent != node || !same_tokens(*child, block)) break;  // collision
    } else {
      PG_DCHECK(pages[i] < slots_.size());
      Node& slot = slots_[pages[i]];
      if (slot.cached) {
        // The caller's page already holds another cached block: its K/V cannot be these
        // tokens', so caching it twice would hand out wrong K/V. A scheduler bug.
        PG_DCHECK(false, "insert: page already caches another block");
        by_hash_.erase(it);
        break;
      }
      pool_.retain(slot.page);
      slot.salt_root = &root;
      slot.hash = hash;
      slot.cached = true;
      std::copy(block.begin(), block.end(), slot.tokens);
      if (node->in_lru) lru_remove(node);
      link_child(node, &slot);
      ++node_count_;
      events_.push_back({CacheEvent::Kind::kStored, hash, node->hash, root.salt, is_root(node),
                         std::vector<TokenId>(block.begin(), block.end())});
      child = it->second = &slot;
    }
    touch(child, now);
    if (cached_pages != nullptr) cached_pages->push_back(child->page);
    node = child;
  }

  if (is_root(node)) {
    if (node->child_count == 0) roots_.erase(roots_.find(root.salt));
    return nullptr;
  }
  // New nodes skip the LRU index while the loop is still giving them children; only the last
  // one can be a leaf.
  if (node->child_count == 0 && node->lock_count == 0 && !node->in_lru) lru_add(node);
  return node;
}

bool RadixCache::remove_leaf(Node* leaf) {
  PG_DCHECK(leaf->cached && leaf->child_count == 0 && leaf->lock_count == 0);
  lru_remove(leaf);
  by_hash_.erase(leaf->hash);
  events_.push_back({CacheEvent::Kind::kRemoved, leaf->hash, 0, leaf->salt_root->salt, false, {}});
  Node* parent = leaf->parent;
  parent->last_used = std::max(parent->last_used, leaf->last_used);  // see unlock
  unlink_child(leaf);
  const bool freed = pool_.refcount(leaf->page) == 1;
  pool_.release(leaf->page);
  const PageId page = leaf->page;
  TokenId* tokens = leaf->tokens;
  const std::uint32_t generation = leaf->generation + 1;
  *leaf = Node{};
  leaf->page = page;
  leaf->tokens = tokens;
  leaf->generation = generation;
  --node_count_;

  if (is_root(parent)) {
    // A salt with nothing cached keeps no root, so tenants that come and go do not pile up.
    // Erase through an iterator: the key would otherwise alias the element being destroyed.
    if (parent->child_count == 0) roots_.erase(roots_.find(parent->salt_root->salt));
  } else if (parent->child_count == 0 && parent->lock_count == 0) {
    lru_add(parent);
  }
  return freed;
}

std::size_t RadixCache::evict(std::size_t pages) {
  std::size_t freed = 0;
  while (freed < pages && !lru_.empty()) {
    if (remove_leaf(&slots_[lru_.begin()->second])) ++freed;
  }
  return freed;
}

void RadixCache::clear() {
  const std::size_t first_event = events_.size();
  std::size_t removed = 0;
  while (!lru_.empty()) {
    remove_leaf(&slots_[lru_.begin()->second]);
    ++removed;
  }
  if (removed > 0 && node_count_ == 0) {
    // Subscribers drop everything on one kCleared; listing each block would only cost them.
    events_.resize(first_event);
    events_.push_back({CacheEvent::Kind::kCleared, 0, 0, {}, false, {}});
  }
}

std::size_t RadixCache::evictable_pages() const {
  std::size_t count = 0;
  for (const Node& slot : slots_) {
    // An unlocked node's whole subtree is unlocked, so eviction can reach every one of them.
    if (slot.cached && slot.lock_count == 0 && pool_.refcount(slot.page) == 1) ++count;
  }
  return count;
}

std::vector<CacheEvent> RadixCache::drain_events() {
  return std::exchange(events_, {});
}

}  // namespace prefixgate::engine
