// The thread's memo of converted requests' tool lists in their client's form. A Messages or
// Responses request's tools are converted, canonicalized as chat tools (through canonicalize's
// own memo, which names the canonical list by the ToolListText it keeps), and carried back into
// the client's body for an upstream that serves that API natively. An agent sends the same tools
// every turn, so that last step, a copy of every definition and its serialization, is done once
// per list: keyed by the canonical list's text object, which stands for the client's bytes, the
// rules and the API it came through (the same bytes through another API or other rules make
// another entry there, and a new text object).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "prefixgate/base/lru_slots.h"
#include "prefixgate/canonicalize/request.h"

namespace prefixgate::gateway::server {

class ClientToolsMemo {
 public:
  static constexpr std::size_t kEntries = 4;

  static ClientToolsMemo& for_this_thread();

  // The client form's JSON text remembered for this canonical list, or nullptr.
  const std::string* find(const canon::ToolListText* canonical);
  // Keeps `client_json` for `canonical`, replacing the least recently used entry. Holding the
  // text object keeps its address from naming another list while the entry lives.
  void remember(std::shared_ptr<const canon::ToolListText> canonical, std::string client_json);

 private:
  struct Entry {
    std::shared_ptr<const canon::ToolListText> canonical;
    std::string client_json;
  };
  LruSlots<Entry, kEntries> entries_;
};

}  // namespace prefixgate::gateway::server
