// HashMultiset: a multiset of 64-bit block hashes, open addressing with linear probing, each
// copy of a hash its own slot. Flat, so that it stays in cache while it is read many times in a
// row (the sweeps of confirmed_log.h), and kept between uses: erases leave a table all zero,
// ready again without being zeroed or faulted in anew.
//
// The slot a hash starts from is its Fibonacci hash (the top bits of hash x 2^64 / phi), so keys
// that are small integers spread as well as block hashes do. 0 marks an empty slot; copies of
// the hash 0 are counted apart. The table doubles when half full; an erase moves the slots after
// it back (no tombstones), so probes stay short however many erases come. Its slots are zeroed
// memory (zeroed_memory.h): from 2 MiB up, pages the kernel zeroes as they are first touched.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "zeroed_memory.h"

namespace prefixgate::gateway {

class HashMultiset {
 public:
  HashMultiset() = default;
  HashMultiset(const HashMultiset&) = delete;
  HashMultiset& operator=(const HashMultiset&) = delete;
  ~HashMultiset() { free_slots(); }

  std::size_t size() const { return size_ + zeros_; }
  bool empty() const { return size() == 0; }
  std::size_t capacity() const { return slots_ ? mask_ + 1 : 0; }
  // Bytes mapped from the kernel for the slots (0 while they come from the allocator).
  std::size_t mapped_bytes() const { return zeroed_memory::mapped(bytes(capacity())); }

  // Room for n hashes without growing.
  void reserve(std::size_t n) {
    if (2 * n > capacity()) rehash(std::bit_ceil(std::max(2 * n, kMinSlots)));
  }

  void insert(std::uint64_t hash) {
    if (hash == 0) {
      ++zeros_;
      return;
    }
    if (2 * (size_ + 1) > capacity()) rehash(slots_ ? 2 * capacity() : kMinSlots);
    std::size_t i = home(hash);
    while (slots_[i] != 0) i = (i + 1) & mask_;
    slots_[i] = hash;
    ++size_;
  }

  // Takes out one copy of `hash`; returns whether there was one.
  bool erase_one(std::uint64_t hash) {
    if (hash == 0) {
      if (zeros_ == 0) return false;
      --zeros_;
      return true;
    }
    if (size_ == 0) return false;
    std::size_t i = home(hash);
    while (slots_[i] != hash) {
      if (slots_[i] == 0) return false;
      i = (i + 1) & mask_;
    }
    close_gap(i);
    --size_;
    return true;
  }

  // Empties it, keeping the slots.
  void clear() {
    if (size_ > 0) std::memset(slots_, 0, bytes(capacity()));
    size_ = zeros_ = 0;
  }

 private:
  static constexpr std::size_t kMinSlots = 64;
  static constexpr std::size_t kAlign = 64;

  std::uint64_t* slots_ = nullptr;
  std::size_t mask_ = 0;  // slots - 1
  int shift_ = 64;        // 64 - log2(slots)
  std::size_t size_ = 0;  // nonzero hashes in slots
  std::size_t zeros_ = 0;

  static std::size_t bytes(std::size_t slots) { return slots * sizeof(std::uint64_t); }
  std::size_t home(std::uint64_t hash) const {
    return static_cast<std::size_t>((hash * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  void free_slots() { zeroed_memory::deallocate(slots_, bytes(capacity()), kAlign); }

  void rehash(std::size_t slots) {
    const std::size_t old_slots = capacity();
    std::uint64_t* old = std::exchange(
        slots_, static_cast<std::uint64_t*>(zeroed_memory::allocate(bytes(slots), kAlign)));
    mask_ = slots - 1;
    shift_ = 64 - std::countr_zero(slots);
    for (std::size_t i = 0; i < old_slots; ++i) {
      const std::uint64_t hash = old[i];
      if (hash == 0) continue;
      std::size_t j = home(hash);
      while (slots_[j] != 0) j = (j + 1) & mask_;
      slots_[j] = hash;
    }
    zeroed_memory::deallocate(old, bytes(old_slots), kAlign);
  }

  // Empties slot `gap`, moving back each later slot of the run whose home does not lie
  // (cyclically) after the gap, so that every hash stays reachable from its home.
  void close_gap(std::size_t gap) {
    for (std::size_t j = (gap + 1) & mask_; slots_[j] != 0; j = (j + 1) & mask_) {
      const std::size_t from_home = (j - home(slots_[j])) & mask_;
      const std::size_t from_gap = (j - gap) & mask_;
      if (from_home >= from_gap) {  // its home is at or before the gap: the gap is on its path
        slots_[gap] = slots_[j];
        gap = j;
      }
    }
    slots_[gap] = 0;
  }
};

}  // namespace prefixgate::gateway
