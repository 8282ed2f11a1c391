#include "json_element_memo.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "prefixgate/base/check.h"

namespace prefixgate::json::internal {

namespace {

// A string's heap: none while it fits in the string itself (libstdc++ keeps 15 bytes inline).
std::size_t string_heap(const std::string& s) {
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

}  // namespace

std::size_t approx_tree_bytes(const Value& value) {
  switch (value.type()) {
    case Type::kNull:
    case Type::kBool: return 0;
    case Type::kNumber: return string_heap(value.as_number().source);
    case Type::kString: return string_heap(value.as_string());
    case Type::kArray: {
      const Array& items = value.as_array();
      std::size_t bytes = items.capacity() * sizeof(Value);
      for (const Value& item : items) bytes += approx_tree_bytes(item);
      return bytes;
    }
    case Type::kObject: {
      const Object& members = value.as_object();
      std::size_t bytes = members.capacity() * sizeof(Member);
      for (const Member& m : members) bytes += string_heap(m.key) + approx_tree_bytes(m.value);
      return bytes;
    }
  }
  return 0;
}

ElementMemo& ElementMemo::for_this_thread() {
  thread_local ElementMemo memo;
  return memo;
}

std::uint64_t ElementMemo::window_hash(std::string_view text) {
  return XXH3_64bits(text.data(), std::min(text.size(), kWindow));
}

ElementMemo::Entry* ElementMemo::find(std::size_t max_depth, std::string_view text) {
  if (text.size() < kMinBytes || by_window_.empty()) return nullptr;
  const auto [first, last] = by_window_.equal_range(window_hash(text));
  for (auto it = first; it != last; ++it) {
    Entry& e = it->second->entry;
    if (e.max_depth == max_depth && e.bytes.size() <= text.size() &&
        std::memcmp(e.bytes.data(), text.data(), e.bytes.size()) == 0) {
      order_.splice(order_.begin(), order_, it->second);
      return &e;
    }
  }
  return nullptr;
}

void ElementMemo::note(std::size_t max_depth, std::string_view bytes) {
  if (bytes.size() < kMinBytes || bytes.size() > kMaxBytes) return;
  order_.push_front(Slot{Entry{max_depth, std::string(bytes), nullptr, 0}, window_hash(bytes)});
  by_window_.emplace(order_.front().window, order_.begin());
  total_bytes_ += bytes.size();
  trim(&order_.front());
}

std::shared_ptr<const Value> ElementMemo::keep(Entry& entry, Value& value) {
  const std::size_t tree_bytes = sizeof(Value) + approx_tree_bytes(value);
  if (tree_bytes > kMaxTreeBytes) return nullptr;
  PG_DCHECK(entry.tree == nullptr);
  entry.tree = std::make_shared<const Value>(std::move(value));
  entry.tree_bytes = tree_bytes;
  total_bytes_ += tree_bytes;
  // find() made the entry the most recently used.
  PG_DCHECK(&order_.front().entry == &entry);
  by_tree_[tree_identity(*entry.tree)] = order_.begin();
  trim(&order_.front());  // never evicts the front
  return entry.tree;
}

// Evicts the least recently used entries other than `spare` until the bounds hold.
void ElementMemo::trim(const Slot* spare) {
  while (order_.size() > 1 && (by_window_.size() > kMaxEntries || total_bytes_ > kMaxTotalBytes)) {
    if (&order_.back() == spare) break;
    evict_last();
  }
}

void ElementMemo::evict_last() {
  const auto victim = std::prev(order_.end());
  const auto [first, last] = by_window_.equal_range(victim->window);
  for (auto it = first; it != last; ++it) {
    if (it->second == victim) {
      by_window_.erase(it);
      break;
    }
  }
  if (victim->entry.tree != nullptr) by_tree_.erase(tree_identity(*victim->entry.tree));
  total_bytes_ -= victim->entry.bytes.size() + victim->entry.tree_bytes;
  order_.erase(victim);
}

const void* tree_identity(const Value& value) {
  if (value.is_object()) return &value.as_object();
  if (value.is_array()) return &value.as_array();
  return nullptr;
}

void ElementMemo::touch(const Value& value) {
  const auto it = by_tree_.find(tree_identity(value));
  if (it != by_tree_.end()) order_.splice(order_.begin(), order_, it->second);
}

void ElementMemo::clear() {
  by_tree_.clear();
  by_window_.clear();
  order_.clear();
  total_bytes_ = 0;
}

}  // namespace prefixgate::json::internal
