// The thread's memo of tool lists it canonicalized: an agent sends the same tools (often tens of
// kilobytes of JSON schemas) on every turn, and checking, re-ordering and scanning them again,
// then serializing them for the prompt and for the forwarded body, costs more than the rest of
// a short request. Keyed by the list's bytes as the client sent them, which fix what
// canonicalization makes of it under given rules; compared in full, so a hit is exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prefixgate/base/lru_slots.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/canonicalize/policy.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::canon::internal {

// What canonicalizing one tool list did.
struct ToolListOutcome {
  // The list as the rules left it, shared with the requests that send it (json::Value::shared);
  // null unless `rewrote`.
  std::shared_ptr<const json::Value> list;
  std::vector<Change> changes;  // what they reported, in order
  bool rewrote = false;         // whether a rule changed the list
  bool reordered = false;       // whether tool-order re-ordered it
  std::shared_ptr<const ToolListText> text;
};

// Lists larger than this are not kept, which bounds what a thread's memo holds (kEntries lists
// with their trees and text, a few MiB at most); agents' tool lists are tens of KiB.
inline constexpr std::size_t kToolListMemoMaxBytes = std::size_t{256} << 10;

class ToolListMemo {
 public:
  static constexpr std::size_t kEntries = 4;

  static ToolListMemo& for_this_thread();

  // The outcome remembered for these client bytes under these rules (`rules` fingerprints the
  // rule modes and granularity, names the list and the API whose bytes they are), or nullptr.
  const ToolListOutcome* find(std::string_view source, std::uint64_t rules);
  // Keeps `outcome`, replacing the least recently used entry. Ignored above the size limit.
  void remember(std::string_view source, std::uint64_t rules, ToolListOutcome outcome);

 private:
  struct Entry {
    std::string source;
    std::uint64_t rules = 0;
    ToolListOutcome outcome;
  };
  LruSlots<Entry, kEntries> entries_;
};

// The text of `list` (a JSON array) with each element's place in it.
std::shared_ptr<const ToolListText> tool_list_text_of(std::string_view key,
                                                      const json::Value& list);

}  // namespace prefixgate::canon::internal
