#include "message_memo.h"

#include "json_element_memo.h"

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

const Message* MessageMemo::find(const json::Value& tree) {
  if (!tree.is_shared()) return nullptr;
  const auto it = by_tree_.find(json::internal::tree_identity(tree));
  if (it == by_tree_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return &it->second->message;
}

void MessageMemo::keep(const json::Value& tree, const Message& message) {
  if (!tree.is_shared()) return;
  const void* identity = json::internal::tree_identity(tree);
  if (identity == nullptr || by_tree_.contains(identity)) return;
  const std::size_t bytes =
      sizeof(Entry) + approx_message_bytes(message) + json::internal::approx_tree_bytes(tree);
  if (bytes > kMaxTotalBytes / 16) return;
  order_.push_front(Entry{tree, message, bytes});
  by_tree_.emplace(identity, order_.begin());
  total_bytes_ += bytes;
  while (by_tree_.size() > kMaxEntries || total_bytes_ > kMaxTotalBytes) evict_last();
}

void MessageMemo::evict_last() {
  const Entry& victim = order_.back();
  by_tree_.erase(json::internal::tree_identity(victim.tree));
  total_bytes_ -= victim.bytes;
  order_.pop_back();
}

void MessageMemo::clear() {
  by_tree_.clear();
  order_.clear();
  total_bytes_ = 0;
}

}  // namespace prefixgate::canon::internal
