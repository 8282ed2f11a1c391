#include "message_memo.h"

namespace prefixgate::canon::internal {
namespace {

// The memory a message holds, about: its parts, their strings and values.
std::size_t approx_message_bytes(const Message& m) {
  std::size_t bytes = sizeof(Message) + m.parts.capacity() * sizeof(ContentPart);
  for (const ContentPart& part : m.parts) {
    bytes += part.type.size() + part.text.size() + json::internal::approx_tree_bytes(part.value);
  }
  if (m.name) bytes += m.name->size();
  if (m.tool_call_id) bytes += m.tool_call_id->size();
  return bytes + json::internal::approx_tree_bytes(m.tool_calls);
}

}  // namespace

MessageMemo& MessageMemo::for_this_thread() {
  thread_local MessageMemo memo;
  return memo;
}

void MessageMemo::keep(const json::Value& tree, const Message& message) {
  if (!tree.is_shared()) return;  // before the copy the memo would take
  SharedTreeMemo::keep(tree, message, approx_message_bytes(message));
}

}  // namespace prefixgate::canon::internal
