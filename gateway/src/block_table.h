// BlockTable: an open-addressing hash table from a 64-bit block hash to a small value, for the
// prefix index. Slots come in buckets of 128 bytes (the pair of cache lines a processor fetches
// together): first the bucket's keys and its overflow count, then their values. A key lives in
// its home bucket, or when that is full in the first bucket after it with room; the count of each
// bucket passed on the way is raised, so a lookup stops at the first bucket without the key whose
// count is 0. An insert, a lookup and an erase thus touch one bucket, rarely two; linear probing
// over single slots read 3.8 slots for a miss at the same load (2.3 cache lines, the later ones
// waiting on the first) and an erase shifted the rest of its run back. A bucket can be fetched
// before the lookup runs (`prefetch`): longest_match issues a batch of prefetches and then
// probes, and the misses of a whole batch overlap. A general-purpose map cannot say where a
// key lives before it is looked up.
//
// Keys are hashes already, but they are mixed once more (Fibonacci hashing) so that a weak key
// set cannot crowd one region, and the bucket is the top of the mixed key times the bucket count
// (no power of two needed). Key 0 marks an empty slot; a real key 0 lives apart.
//
// The table grows by half when three quarters of its slots are taken, so its load stays between
// one half and three quarters. It grows a little at a time: the index is read and written under
// the gateway's routing lock, and a table of 10 M blocks copied at once held every request for
// hundreds of milliseconds. The larger buckets are allocated (from 2 MiB, pages mapped zeroed by
// the kernel as they are first touched, not written here: zeroed_memory.h), and from then on each
// insert of a new key first moves the entries of the next kMovedPerInsert buckets of the old table
// into the new, which is done well before the new one is three quarters full. Meanwhile a key is
// in exactly one of the two: lookups try the new table, then the old; new keys go to the new. The
// old table's overflow counts are left as they were when its entries move out (an erase there
// still lowers them): a count that is too high costs a lookup in the old table a bucket more,
// never a wrong answer. Any pointer into the table is invalid after an insert of a new key; an
// erase moves nothing. A table of 2 MiB or more asks for huge pages (MADV_HUGEPAGE): at 10 M
// blocks the buckets span 400 MB, and with 4 KiB pages nearly every lookup would also miss the TLB.
//
//   BlockTable<Entry> table;
//   table.try_emplace(hash).value.x = 1;
//   table.prefetch(other);  ...  if (const Entry* e = table.find(other)) ...
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "prefixgate/base/check.h"
#include "zeroed_memory.h"

namespace prefixgate::gateway {

template <typename Value>
class BlockTable {
 public:
  static_assert(std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>);
  static constexpr std::size_t kBucketBytes = 128;
  // As many (key, value) slots as fit beside the overflow count: 5 for the index's 16-byte entry.
  static constexpr std::size_t kSlots =
      (kBucketBytes - 2 * sizeof(std::uint32_t)) / (sizeof(std::uint64_t) + sizeof(Value));
  static_assert(kSlots >= 2, "a value this large wants another layout");

  // Old buckets moved to the new table on each insert of a new key while the table grows. The
  // new table starts half full with room for 1.9 inserts per old bucket before it is three
  // quarters full, so two a key finishes the move with room to spare.
  static constexpr std::size_t kMovedPerInsert = 2;

  BlockTable() = default;
  ~BlockTable() {
    deallocate(buckets_, count_);
    deallocate(old_, old_count_);
  }
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  // The sum of the (new) buckets' overflow counts, O(buckets): for tests (0 when every key is
  // home). Whether the table is still moving entries from its old buckets: for tests.
  std::size_t overflow_total() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count_; ++i) n += buckets_[i].overflow;
    return n;
  }
  bool growing() const { return old_ != nullptr; }
  // Bytes mapped from the kernel rather than allocated (see allocate()), both tables.
  std::size_t mapped_bytes() const { return mapped(count_) + mapped(old_count_); }

  // Both of the bucket's lines: the keys', and the values' that a caller reads next. Not the old
  // table's while growing: a test for it here slowed every batch of lookups and inserts by
  // 10-30 % (BM_BlockTableChurn), for the few that a growth sends to the old buckets.
  void prefetch(std::uint64_t key) const {
    if (count_ == 0) return;
    fetch(&buckets_[home(key, count_)]);
  }

  const Value* find(std::uint64_t key) const {
    if (key == 0) return has_zero_ ? &zero_ : nullptr;
    if (count_ == 0) return nullptr;
    if (const Value* v = find_in(buckets_, count_, key)) return v;
    return old_ == nullptr ? nullptr : find_old(key);
  }
  Value* find(std::uint64_t key) { return const_cast<Value*>(std::as_const(*this).find(key)); }

  // The value of `key`, value-initialized when it was not there.
  Value& try_emplace(std::uint64_t key) {
    if (key == 0) {
      if (!has_zero_) zero_ = Value{};
      has_zero_ = true;
      return zero_;
    }
    if (Value* there = find(key)) return *there;
    if (old_ != nullptr) [[unlikely]] {
      move_old_buckets(kMovedPerInsert);
    } else if ((size_ + 1) * 4 > count_ * kSlots * 3) {
      grow();
    }
    ++size_;
    return place(key);
  }

  // Returns whether `key` was there.
  bool erase(std::uint64_t key) {
    if (key == 0) return std::exchange(has_zero_, false);
    Value* value = find(key);
    if (value == nullptr) return false;
    erase_found(*value);
    return true;
  }

  // Erases the entry whose value `value` is (from find or try_emplace, still valid): what a
  // caller holding the value would otherwise find again by its key.
  void erase_found(const Value& value) {
    if (&value == &zero_) {
      has_zero_ = false;
      return;
    }
    const auto at = reinterpret_cast<std::uintptr_t>(&value);
    const auto old_begin = reinterpret_cast<std::uintptr_t>(old_);
    if (old_ != nullptr && at >= old_begin && at < old_begin + old_count_ * sizeof(Bucket))
        [[unlikely]] {
      erase_at(old_, old_count_, at);  // not moved yet
    } else {
      erase_at(buckets_, count_, at);
    }
    --size_;
  }

 private:
  struct alignas(kBucketBytes) Bucket {
    std::uint64_t keys[kSlots];  // 0: empty
    // Keys whose home is this bucket or one before it that live past it.
    std::uint32_t overflow;
    Value values[kSlots];
  };
  static_assert(sizeof(Bucket) == kBucketBytes && std::is_trivially_copyable_v<Bucket>);

  // The high half of the mixed key times the bucket count: a bucket in [0, count), evenly.
  __extension__ using Wide = unsigned __int128;  // GCC and Clang; __extension__: -Wpedantic
  static std::size_t home(std::uint64_t key, std::size_t count) {
    const std::uint64_t mixed = key * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>((static_cast<Wide>(mixed) * count) >> 64);
  }
  static std::size_t next(std::size_t i, std::size_t count) { return i + 1 == count ? 0 : i + 1; }
  static void fetch(const Bucket* bucket) {
    __builtin_prefetch(bucket);
    __builtin_prefetch(reinterpret_cast<const char*>(bucket) + kBucketBytes / 2);
  }

  static const Value* find_in(const Bucket* buckets, std::size_t count, std::uint64_t key) {
    for (std::size_t i = home(key, count);; i = next(i, count)) {
      const Bucket& b = buckets[i];
      for (std::size_t j = 0; j < kSlots; ++j) {
        if (b.keys[j] == key) return &b.values[j];
      }
      if (b.overflow == 0) return nullptr;
    }
  }

  // Kept out of line: while growing only, and find's loop stays as small as a single table's.
  [[gnu::noinline]] const Value* find_old(std::uint64_t key) const {
    return find_in(old_, old_count_, key);
  }

  // Empties the slot whose value is at address `at` in `buckets`.
  static void erase_at(Bucket* buckets, std::size_t count, std::uintptr_t at) {
    const std::size_t i = (at - reinterpret_cast<std::uintptr_t>(buckets)) / sizeof(Bucket);
    Bucket& b = buckets[i];
    const std::size_t j = (at - reinterpret_cast<std::uintptr_t>(&b.values[0])) / sizeof(Value);
    // The buckets it passed on its way here no longer count it.
    for (std::size_t k = home(b.keys[j], count); k != i; k = next(k, count)) --buckets[k].overflow;
    b.keys[j] = 0;
  }

  // A key in neither table, with room for it in the new one: the first bucket from its home with
  // a free slot.
  Value& place(std::uint64_t key) {
    for (std::size_t i = home(key, count_);; i = next(i, count_)) {
      Bucket& b = buckets_[i];
      for (std::size_t j = 0; j < kSlots; ++j) {
        if (b.keys[j] != 0) continue;
        b.keys[j] = key;
        b.values[j] = Value{};
        return b.values[j];
      }
      ++b.overflow;
    }
  }

  static std::size_t mapped(std::size_t count) {
    return zeroed_memory::mapped(count * sizeof(Bucket));
  }
  // Large tables are mapped, zeroed by the kernel page by page as they are first touched, which
  // spreads that cost over the inserts that follow (zeroed_memory.h). All zero is an empty bucket.
  static Bucket* allocate(std::size_t count) {
    return static_cast<Bucket*>(zeroed_memory::allocate(count * sizeof(Bucket), alignof(Bucket)));
  }
  static void deallocate(Bucket* buckets, std::size_t count) {
    zeroed_memory::deallocate(buckets, count * sizeof(Bucket), alignof(Bucket));
  }

  // Starts growing (never while still growing: see kMovedPerInsert): the new buckets, the old
  // ones kept until their entries have moved.
  void grow() {
    PG_DCHECK(old_ == nullptr);
    old_count_ = count_;
    old_ = std::exchange(buckets_, nullptr);  // none before the first growth
    moved_ = 0;
    count_ = old_count_ == 0 ? 4 : old_count_ + old_count_ / 2;
    buckets_ = allocate(count_);
  }

  // Moves the entries of the next `n` old buckets to the new table; frees the old table once
  // they all have.
  [[gnu::noinline]] void move_old_buckets(std::size_t n) {
    for (const std::size_t end = std::min(old_count_, moved_ + n); moved_ < end; ++moved_) {
      Bucket& b = old_[moved_];
      for (std::size_t j = 0; j < kSlots; ++j) {
        if (b.keys[j] == 0) continue;
        place(b.keys[j]) = b.values[j];
        b.keys[j] = 0;
      }
    }
    if (moved_ == old_count_) {
      deallocate(old_, old_count_);
      old_ = nullptr;
      old_count_ = 0;
    }
  }

  Bucket* buckets_ = nullptr;
  std::size_t count_ = 0;  // buckets
  std::size_t size_ = 0;   // non-zero keys, in both tables
  // While growing: the old buckets, and how many of them have had their entries moved.
  Bucket* old_ = nullptr;
  std::size_t old_count_ = 0;
  std::size_t moved_ = 0;
  bool has_zero_ = false;
  Value zero_{};
};

}  // namespace prefixgate::gateway
