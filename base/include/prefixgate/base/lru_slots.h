// A handful of entries, the least recently used replaced first: the per-thread memos of work an
// agent's requests repeat turn after turn (its tool lists), where the distinct keys in play are
// few and a scan of a few slots costs less than any map.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace prefixgate {

template <class Entry, std::size_t N>
class LruSlots {
 public:
  static constexpr std::size_t kSlots = N;

  // The first entry in use that `matches(entry)` accepts, now the most recently used; nullptr
  // when there is none.
  template <class Match>
  Entry* find(Match&& matches) {
    for (Slot& s : slots_) {
      if (s.last_used != 0 && matches(static_cast<const Entry&>(s.entry))) {
        s.last_used = ++clock_;
        return &s.entry;
      }
    }
    return nullptr;
  }

  // The slot to fill (an empty one, or the least recently used), now the most recently used.
  Entry& replace() {
    Slot* oldest = &slots_[0];
    for (Slot& s : slots_) {
      if (s.last_used < oldest->last_used) oldest = &s;
    }
    oldest->last_used = ++clock_;
    return oldest->entry;
  }

 private:
  struct Slot {
    Entry entry{};
    std::uint64_t last_used = 0;  // 0: empty
  };
  std::array<Slot, N> slots_{};
  std::uint64_t clock_ = 0;
};

}  // namespace prefixgate
