// What a thread made from a shared JSON tree (json_element_memo.h: a conversation's earlier
// turns come back from the parser as the very trees it built for them before), kept by the
// tree: the messages parse_request_value() made (message_memo.h), the chat messages an Anthropic
// Messages turn converted into (anthropic_request.cpp).
//
// Why it is exact: a shared tree never changes while anything refers to it, and an entry holds a
// reference to its tree, so the address it is found by cannot be another tree's while the entry
// lives. Only shared trees are looked up or kept: a request's own tree is gone with it, and its
// address may be the next request's.
//
// Bounded by entries and by bytes (what the caller counts for a value, and the tree it keeps
// alive); a value over a sixteenth of the bytes is not kept. Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <list>
#include <unordered_map>
#include <utility>

#include "json_element_memo.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::canon::internal {

template <class T>
class SharedTreeMemo {
 public:
  SharedTreeMemo(std::size_t max_entries, std::size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // What was kept for `tree` (a shared value: Value::is_shared), or nullptr.
  const T* find(const json::Value& tree) {
    if (!tree.is_shared()) return nullptr;
    const auto it = by_tree_.find(json::internal::tree_identity(tree));
    if (it == by_tree_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->value;
  }

  // Keeps `value`, made from `tree`, when `tree` is shared and not kept yet; `value_bytes` is
  // the memory `value` holds. Evicts the least recently used entries beyond the bounds.
  void keep(const json::Value& tree, T value, std::size_t value_bytes) {
    if (!tree.is_shared()) return;
    const void* identity = json::internal::tree_identity(tree);
    if (identity == nullptr || by_tree_.contains(identity)) return;
    const std::size_t bytes = sizeof(Entry) + value_bytes + json::internal::approx_tree_bytes(tree);
    if (bytes > max_bytes_ / 16) return;
    order_.push_front(Entry{tree, std::move(value), bytes});
    by_tree_.emplace(identity, order_.begin());
    total_bytes_ += bytes;
    while (by_tree_.size() > max_entries_ || total_bytes_ > max_bytes_) evict_last();
  }

  std::size_t entries() const { return by_tree_.size(); }
  std::size_t total_bytes() const { return total_bytes_; }
  // Forgets everything (tests).
  void clear() {
    by_tree_.clear();
    order_.clear();
    total_bytes_ = 0;
  }

 private:
  struct Entry {
    json::Value tree;  // refers to the shared tree: keeps it, and so its address, alive
    T value;
    std::size_t bytes = 0;
  };
  using Order = std::list<Entry>;  // most recently used first

  void evict_last() {
    const Entry& victim = order_.back();
    by_tree_.erase(json::internal::tree_identity(victim.tree));
    total_bytes_ -= victim.bytes;
    order_.pop_back();
  }

  std::size_t max_entries_;
  std::size_t max_bytes_;
  Order order_;
  std::unordered_map<const void*, typename Order::iterator> by_tree_;
  std::size_t total_bytes_ = 0;
};

}  // namespace prefixgate::canon::internal
