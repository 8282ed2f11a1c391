// The thread's memo of root members' subtrees that json::parse built, by their bytes: an agent
// sends the same tool list, often tens of kilobytes of JSON schemas, on every turn, and building
// its tree again (an allocation per object, array and long string) cost more than the rest of
// the parse of a short request. A JSON array or object is self-delimiting, so when the bytes at
// a value's first byte begin with a list parsed before, the value is that list and parses to
// the same tree: the memo compares bytes, never hashes, and a hit is exact.
//
// A list is kept from its second sighting (its first only notes its bytes): a thread that sees
// more distinct lists than it has slots never builds a tree it cannot reuse, and never pays for
// a copy a rule's rewrite would make of a kept one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "prefixgate/base/lru_slots.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json::internal {

class SubtreeMemo {
 public:
  static constexpr std::size_t kEntries = 4;
  // Smaller values cost less to build than to remember; larger ones would let a thread keep
  // tens of MiB of trees (the same bound as canonicalize's tool-list memo).
  static constexpr std::size_t kMinBytes = 64;
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 10;

  static SubtreeMemo& for_this_thread();

  struct Entry {
    std::string key;
    std::size_t max_depth = 0;  // the limit it parsed under: another limit may refuse it
    std::string bytes;
    std::shared_ptr<const Value> tree;  // null: seen once, not kept yet
  };

  // The entry for root member `key` whose bytes begin `text` (the text from the value's first
  // byte to the end of the document), or nullptr.
  Entry* find(std::string_view key, std::size_t max_depth, std::string_view text);
  // Notes a value's bytes seen for the first time, replacing the least recently used entry.
  // Ignored outside [kMinBytes, kMaxBytes].
  void note(std::string_view key, std::size_t max_depth, std::string_view bytes);
  // Marks the entry whose kept tree `value` refers to as just used (a body that took it from
  // the document memo instead of finding it here).
  void touch(const Value& value);

 private:
  LruSlots<Entry, kEntries> entries_;
};

}  // namespace prefixgate::json::internal
