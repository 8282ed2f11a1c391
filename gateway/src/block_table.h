// BlockTable: an open-addressing hash table from a 64-bit block hash to a small value, for the
// prefix index. Linear probing over one array of (key, value) slots, so a lookup is one cache
// line or two, and its first one can be prefetched before the lookup runs (`prefetch`):
// longest_match issues a batch of prefetches and then probes, and the misses of a whole batch
// overlap. A general-purpose map cannot say where a key lives before it is looked up.
//
// Keys are hashes already, but they are mixed once more (Fibonacci hashing) so that a weak key
// set cannot crowd one region. Key 0 marks an empty slot; a real key 0 lives apart. Erase
// shifts the following run back (no tombstones), so any pointer into the table is invalid after
// an insert or an erase. A table of 2 MiB or more asks the kernel for huge pages
// (MADV_HUGEPAGE): at 10 M blocks the slots span 400 MB, and with 4 KiB pages nearly every
// lookup would also miss the TLB.
//
//   BlockTable<Entry> table;
//   table.try_emplace(hash).value.x = 1;
//   table.prefetch(other);  ...  if (const Entry* e = table.find(other)) ...
#pragma once

#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace prefixgate::gateway {

template <typename Value>
class BlockTable {
 public:
  struct Slot {
    std::uint64_t key = 0;  // 0: empty
    Value value{};
  };
  static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_destructible_v<Slot>);

  BlockTable() = default;
  ~BlockTable() { deallocate(slots_, capacity_); }
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

  void prefetch(std::uint64_t key) const {
    if (capacity_ != 0) __builtin_prefetch(&slots_[home(key)]);
  }

  const Value* find(std::uint64_t key) const {
    if (key == 0) return has_zero_ ? &zero_ : nullptr;
    if (capacity_ == 0) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
    }
  }
  Value* find(std::uint64_t key) { return const_cast<Value*>(std::as_const(*this).find(key)); }

  // The value of `key`, value-initialized when it was not there.
  Value& try_emplace(std::uint64_t key) {
    if (key == 0) {
      if (!has_zero_) zero_ = Value{};
      has_zero_ = true;
      return zero_;
    }
    // Load at most 3/4: linear probing past that makes a miss walk long runs (a miss at load a
    // reads about (1 + 1 / (1 - a)^2) / 2 slots: 8.5 at 3/4, 32 at 7/8).
    if ((size_ + 1) * 4 > capacity_ * 3) grow();
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) break;
    }
    slots_[i].key = key;
    slots_[i].value = Value{};
    ++size_;
    return slots_[i].value;
  }

  // Returns whether `key` was there.
  bool erase(std::uint64_t key) {
    if (key == 0) return std::exchange(has_zero_, false);
    if (capacity_ == 0) return false;
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == 0) return false;
    }
    erase_slot(i);
    return true;
  }

  // Erases the entry whose value `value` is (from find or try_emplace, still valid): what a
  // caller holding the value would otherwise find again by its key.
  void erase_found(const Value& value) {
    if (&value == &zero_) {
      has_zero_ = false;
      return;
    }
    const auto* slot = reinterpret_cast<const char*>(&value) - offsetof(Slot, value);
    erase_slot(static_cast<std::size_t>(reinterpret_cast<const Slot*>(slot) - slots_));
  }

 private:
  // Backward shift: moves each later slot of the run into the hole when its home allows.
  void erase_slot(std::size_t i) {
    for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].key);
      // Movable when its home is not in (i, j] (cyclically): the hole lies on its probe path.
      const bool home_after_hole = ((j - h) & mask_) < ((j - i) & mask_);
      if (home_after_hole) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
    --size_;
  }

  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }

  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  static std::align_val_t alignment(std::size_t capacity) {
    return std::align_val_t{capacity * sizeof(Slot) >= kHugePage ? kHugePage : alignof(Slot)};
  }
  static Slot* allocate(std::size_t capacity) {
    const std::size_t bytes = capacity * sizeof(Slot);
    void* p = ::operator new(bytes, alignment(capacity));
    // Advice only: without huge pages the table works the same, with more TLB misses.
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
    Slot* slots = static_cast<Slot*>(p);
    std::uninitialized_value_construct_n(slots, capacity);
    return slots;
  }
  static void deallocate(Slot* slots, std::size_t capacity) {
    if (slots != nullptr) ::operator delete(slots, alignment(capacity));
  }

  void grow() {
    const std::size_t old_capacity = capacity_;
    Slot* old = std::exchange(slots_, allocate(old_capacity == 0 ? 16 : old_capacity * 2));
    capacity_ = old_capacity == 0 ? 16 : old_capacity * 2;
    mask_ = capacity_ - 1;
    shift_ = 64 - std::countr_zero(capacity_);
    for (std::size_t k = 0; k < old_capacity; ++k) {
      if (old[k].key == 0) continue;
      std::size_t i = home(old[k].key);
      while (slots_[i].key != 0) i = (i + 1) & mask_;
      slots_[i] = old[k];
    }
    deallocate(old, old_capacity);
  }

  Slot* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;  // non-zero keys
  std::size_t mask_ = 0;
  int shift_ = 64;
  bool has_zero_ = false;
  Value zero_{};
};

}  // namespace prefixgate::gateway
