#include "server/client_tools_memo.h"

#include <utility>

namespace prefixgate::gateway::server {

ClientToolsMemo& ClientToolsMemo::for_this_thread() {
  thread_local ClientToolsMemo memo;
  return memo;
}

const std::string* ClientToolsMemo::find(const canon::ToolListText* canonical) {
  if (canonical == nullptr) return nullptr;
  Entry* hit = entries_.find([&](const Entry& e) { return e.canonical.get() == canonical; });
  return hit != nullptr ? &hit->client_json : nullptr;
}

void ClientToolsMemo::remember(std::shared_ptr<const canon::ToolListText> canonical,
                               std::string client_json) {
  if (canonical == nullptr) return;
  Entry& e = entries_.replace();
  e.canonical = std::move(canonical);
  e.client_json = std::move(client_json);
}

}  // namespace prefixgate::gateway::server
