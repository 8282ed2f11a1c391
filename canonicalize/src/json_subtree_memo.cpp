#include "json_subtree_memo.h"

#include <cstring>

#include "json_element_memo.h"

namespace prefixgate::json::internal {

SubtreeMemo& SubtreeMemo::for_this_thread() {
  thread_local SubtreeMemo memo;
  return memo;
}

SubtreeMemo::Entry* SubtreeMemo::find(std::string_view key, std::size_t max_depth,
                                      std::string_view text) {
  return entries_.find([&](const Entry& e) {
    return e.max_depth == max_depth && e.key == key && e.bytes.size() <= text.size() &&
           std::memcmp(e.bytes.data(), text.data(), e.bytes.size()) == 0;
  });
}

void SubtreeMemo::touch(const Value& value) {
  const void* target = tree_identity(value);
  if (target == nullptr) return;
  entries_.find(
      [&](const Entry& e) { return e.tree != nullptr && tree_identity(*e.tree) == target; });
}

void SubtreeMemo::note(std::string_view key, std::size_t max_depth, std::string_view bytes) {
  if (bytes.size() < kMinBytes || bytes.size() > kMaxBytes) return;
  Entry& e = entries_.replace();
  e.key.assign(key);
  e.max_depth = max_depth;
  e.bytes.assign(bytes);
  e.tree.reset();
}

}  // namespace prefixgate::json::internal
