// Whole-tree walks of the prefix cache: the kv_events snapshot and the invariant checker.
// Both are O(nodes) and off the request path.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/engine/radix_cache.h"
#include "radix_cache_node.h"

namespace prefixgate::engine {
namespace {

using Node = RadixCache::Node;

// Calls visit(node) for every node below `root`, each before its children. Iterative: a 32k
// token prompt is a path 2048 nodes deep.
template <typename Visit>
void walk_preorder(const Node& root, Visit&& visit) {
  std::vector<const Node*> stack;
  for (const Node* c = root.first_child; c != nullptr; c = c->next_sibling) stack.push_back(c);
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    visit(*node);
    for (const Node* c = node->first_child; c != nullptr; c = c->next_sibling) stack.push_back(c);
  }
}

}  // namespace

std::vector<CachedBlock> RadixCache::snapshot() const {
  std::vector<const SaltRoot*> roots;
  roots.reserve(roots_.size());
  for (const auto& [salt, root] : roots_) roots.push_back(root.get());
  std::sort(roots.begin(), roots.end(),
            [](const SaltRoot* a, const SaltRoot* b) { return a->salt < b->salt; });
  std::vector<CachedBlock> out;
  out.reserve(node_count_);
  for (const SaltRoot* root : roots) {
    walk_preorder(root->node, [&](const Node& node) {
      out.push_back({node.hash, node.parent->hash, root->salt});
    });
  }
  return out;
}

std::string RadixCache::check_invariants() const {
  std::string error;
  std::size_t walked = 0;
  std::size_t unlocked_leaves = 0;
  for (const auto& [key, root] : roots_) {
    const std::string where = "salt \"" + key + "\": ";
    if (root->salt != key) return where + "root filed under another salt";
    const Node& top = root->node;
    if (top.parent != nullptr || top.cached || top.salt_root != root.get()) {
      return where + "root looks like a cached node";
    }
    if (top.hash != canon::block_hash_root(model_id_, key)) return where + "wrong root hash";
    if (top.child_count == 0) return where + "root kept with nothing cached";
    if (top.lock_count != 0 || top.direct_locks != 0) return where + "root carries locks";

    auto check_node = [&](const Node& node) -> std::string {
      const std::string at = where + "block " + canon::hash_hex(node.hash) + " (page " +
                             std::to_string(node.page) + "): ";
      if (!node.cached) return at + "linked but not marked cached";
      if (node.page >= slots_.size() || &slots_[node.page] != &node) {
        return at + "not in its page's slot";
      }
      if (node.salt_root != root.get()) return at + "points at another salt's root";
      if (node.tokens == nullptr) return at + "no tokens";
      const std::span<const TokenId> tokens(node.tokens, page_tokens_);
      if (node.hash != canon::chain_block_hash(node.parent->hash, tokens)) {
        return at + "hash is not chain_block_hash(parent hash, tokens)";
      }
      auto indexed = by_hash_.find(node.hash);
      if (indexed == by_hash_.end() || indexed->second != &node) return at + "not in hash index";
      if (pool_.refcount(node.page) == 0) return at + "page is free in the pool";
      std::uint32_t children = 0;
      std::uint32_t locks_below = 0;
      const Node* prev = nullptr;
      for (const Node* c = node.first_child; c != nullptr; c = c->next_sibling) {
        if (c->parent != &node || c->prev_sibling != prev) return at + "broken child link";
        // A locked node may lag its children (radix_cache_node.h); an unlocked one may not.
        if (c->last_used > node.last_used && node.lock_count == 0) {
          return at + "child used more recently than its unlocked parent";
        }
        ++children;
        locks_below += c->lock_count;
        prev = c;
      }
      if (children != node.child_count) return at + "child count is off";
      if (node.lock_count != node.direct_locks + locks_below) {
        return at + "lock count is not the sum of the locks at and below it";
      }
      const bool evictable_leaf = children == 0 && node.lock_count == 0;
      if (node.in_lru != evictable_leaf) return at + "LRU membership disagrees with leaf/lock";
      if (node.in_lru && lru_.count({node.last_used, node.page}) != 1) {
        return at + "LRU index has a stale key";
      }
      if (evictable_leaf) ++unlocked_leaves;
      return {};
    };
    // The root's own child links are checked like any node's.
    std::uint32_t top_children = 0;
    for (const Node* c = top.first_child; c != nullptr; c = c->next_sibling, ++top_children) {
      if (c->parent != &top) return where + "broken child link at the root";
    }
    if (top_children != top.child_count) return where + "root's child count is off";
    walk_preorder(top, [&](const Node& node) {
      ++walked;
      if (error.empty()) error = check_node(node);
    });
    if (!error.empty()) return error;
  }
  if (walked != node_count_) return "node count is off: walked " + std::to_string(walked);
  const auto cached_slots =
      std::count_if(slots_.begin(), slots_.end(), [](const Node& slot) { return slot.cached; });
  if (static_cast<std::size_t>(cached_slots) != node_count_) {
    return "cached slots not reachable from a root: " + std::to_string(cached_slots);
  }
  if (by_hash_.size() != node_count_) return "hash index holds removed nodes";
  if (lru_.size() != unlocked_leaves) return "LRU index is not exactly the unlocked leaves";
  return {};
}

}  // namespace prefixgate::engine
