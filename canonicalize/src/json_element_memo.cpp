#include "json_element_memo.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace prefixgate::json::internal {

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
  while (!order_.empty() &&
         (by_window_.size() >= kMaxEntries || total_bytes_ + bytes.size() > kMaxTotalBytes)) {
    evict_last();
  }
  order_.push_front(Slot{Entry{max_depth, std::string(bytes), nullptr}, window_hash(bytes)});
  by_window_.emplace(order_.front().window, order_.begin());
  total_bytes_ += bytes.size();
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
  total_bytes_ -= victim->entry.bytes.size();
  order_.erase(victim);
}

void ElementMemo::clear() {
  by_window_.clear();
  order_.clear();
  total_bytes_ = 0;
}

}  // namespace prefixgate::json::internal
