// The thread's memo of the messages parse_request_value() validated and converted, by the tree
// they were parsed from: an agent resends its whole conversation on every turn, and the JSON
// parser already hands each earlier turn back as the very tree it built for it before
// (json_element_memo.h: a shared tree, the same object at the same address). Converting that
// tree into a Message again (looking up its fields, checking their types, copying its text)
// made a long conversation's request cost a few thousand instructions for each earlier turn.
//
// Why it is exact: a shared tree never changes while anything refers to it, and an entry holds
// a reference to its tree, so the address it is found by cannot be another tree's while the
// entry lives. parse_message's result depends on the tree alone (and on the index, which the
// caller sets). Only shared trees are looked up: a request's own tree is gone with it.
//
// Bounded by entries and by bytes (the messages' strings and the trees the entries keep alive):
// at most kMaxTotalBytes a thread. Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <list>
#include <unordered_map>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon::internal {

class MessageMemo {
 public:
  static constexpr std::size_t kMaxEntries = 1024;
  static constexpr std::size_t kMaxTotalBytes = std::size_t{16} << 20;

  static MessageMemo& for_this_thread();

  // The message parsed before from `tree` (a shared value: Value::is_shared), or nullptr.
  const Message* find(const json::Value& tree);
  // Keeps `message`, parsed from `tree`, when `tree` is shared and the two come to at most a
  // sixteenth of kMaxTotalBytes; evicts the least recently used entries beyond the bounds.
  void keep(const json::Value& tree, const Message& message);

  std::size_t entries() const { return by_tree_.size(); }
  std::size_t total_bytes() const { return total_bytes_; }
  // Forgets everything (tests).
  void clear();

 private:
  struct Entry {
    json::Value tree;  // refers to the shared tree: keeps it, and so its address, alive
    Message message;
    std::size_t bytes = 0;
  };
  using Order = std::list<Entry>;  // most recently used first
  void evict_last();

  Order order_;
  std::unordered_map<const void*, Order::iterator> by_tree_;
  std::size_t total_bytes_ = 0;
};

}  // namespace prefixgate::canon::internal
