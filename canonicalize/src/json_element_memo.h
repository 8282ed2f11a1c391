// The thread's memo of the elements of a request's message list that json::parse built, by their
// bytes: an agent resends its whole conversation on every turn, and building the tree of every
// earlier turn again (an allocation per object and per string, every string unescaped and
// copied) made the parse of a long conversation grow with all of it rather than with its new
// turn. A JSON object or array is self-delimiting, so when the bytes at an element's first byte
// begin with an element built before, the element is that one and parses to the same tree: a hit
// is exact (the bytes are compared), the hash of an element's first bytes only finds candidates.
//
// As json_subtree_memo.h, an element is kept from its second sighting (the first only notes its
// bytes), so that a thread never builds a tree it cannot reuse. Bounded by entries and by bytes:
// a thread remembers the last few conversations' turns, never more than kMaxTotalBytes of their
// text and trees together. A tree is counted by its nodes and strings, not by its text: JSON
// such as `[1,1,1,...]` makes a tree tens of times its size, and one that would take more than
// kMaxTreeBytes is not kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json::internal {

// The heap a tree holds, about: its nodes, their vectors' and strings' storage (what the
// allocator rounds up is not counted).
std::size_t approx_tree_bytes(const Value& value);

// A kept tree's identity: the address of its object or array, the same through any value that
// refers to it (nullptr for a scalar).
const void* tree_identity(const Value& value);

class ElementMemo {
 public:
  // Smaller elements cost about as much to find as to build.
  static constexpr std::size_t kMinBytes = 128;
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 10;
  static constexpr std::size_t kMaxEntries = 1024;
  static constexpr std::size_t kMaxTotalBytes = std::size_t{8} << 20;  // text and trees
  static constexpr std::size_t kMaxTreeBytes = std::size_t{1} << 20;
  // Candidates are found by the hash of an element's first kWindow bytes.
  static constexpr std::size_t kWindow = 64;

  static ElementMemo& for_this_thread();

  struct Entry {
    std::size_t max_depth = 0;  // the limit it parsed under: another limit may refuse it
    std::string bytes;
    std::shared_ptr<const Value> tree;  // null: seen once, not kept yet
    std::size_t tree_bytes = 0;         // the tree's memory, as approx_tree_bytes counts it
  };

  // The entry whose bytes begin `text` (the text from an element's first byte to the end of the
  // document), parsed under `max_depth`, or nullptr.
  Entry* find(std::size_t max_depth, std::string_view text);
  // Notes an element's bytes seen for the first time, evicting the least recently used entries
  // beyond the bounds. Ignored outside [kMinBytes, kMaxBytes].
  void note(std::size_t max_depth, std::string_view bytes);
  // Keeps `value`, built from `entry`'s bytes (its second sighting): moves it into the entry's
  // tree and returns that, evicting the least recently used others beyond the bounds. Null, and
  // `value` left as it was, for a tree over kMaxTreeBytes.
  std::shared_ptr<const Value> keep(Entry& entry, Value& value);

  // Marks the kept tree that `value` refers to (Value::shared) as just used: a parse that took
  // it from elsewhere (json_document_memo.h) keeps it from being the next to go. Nothing when
  // this memo no longer keeps it.
  void touch(const Value& value);

  std::size_t entries() const { return by_window_.size(); }
  std::size_t total_bytes() const { return total_bytes_; }
  // Forgets everything (tests).
  void clear();

 private:
  struct Slot {
    Entry entry;
    std::uint64_t window = 0;
  };
  using Order = std::list<Slot>;  // most recently used first
  static std::uint64_t window_hash(std::string_view text);
  void evict_last();
  void trim(const Slot* spare);

  Order order_;

  std::unordered_multimap<std::uint64_t, Order::iterator> by_window_;
  std::unordered_map<const void*, Order::iterator> by_tree_;
  std::size_t total_bytes_ = 0;
};

}  // namespace prefixgate::json::internal
