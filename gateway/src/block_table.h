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
// (no power of two needed). Key 0 marks an empty slot; a real key 0 lives apart. The table grows
// by half when three quarters of its slots are taken, so its load stays between one half and
// three quarters. Any pointer into it is invalid after an insert that grows it; an erase moves
// nothing. A table of 2 MiB or more asks the kernel for huge pages (MADV_HUGEPAGE): at 10 M
// blocks the buckets span 400 MB, and with 4 KiB pages nearly every lookup would also miss the TLB.
//
//   BlockTable<Entry> table;
//   table.try_emplace(hash).value.x = 1;
//   table.prefetch(other);  ...  if (const Entry* e = table.find(other)) ...
#pragma once

#include <sys/mman.h>

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
  static_assert(std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>);
  static constexpr std::size_t kBucketBytes = 128;
  // As many (key, value) slots as fit beside the overflow count: 5 for the index's 16-byte entry.
  static constexpr std::size_t kSlots =
      (kBucketBytes - 2 * sizeof(std::uint32_t)) / (sizeof(std::uint64_t) + sizeof(Value));
  static_assert(kSlots >= 2, "a value this large wants another layout");

  BlockTable() = default;
  ~BlockTable() { deallocate(buckets_, count_); }
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  // The sum of the buckets' overflow counts, O(buckets): for tests (0 when every key is home).
  std::size_t overflow_total() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count_; ++i) n += buckets_[i].overflow;
    return n;
  }

  // Both of the bucket's lines: the keys', and the values' that a caller reads next.
  void prefetch(std::uint64_t key) const {
    if (count_ == 0) return;
    const char* bucket = reinterpret_cast<const char*>(&buckets_[home(key)]);
    __builtin_prefetch(bucket);
    __builtin_prefetch(bucket + kBucketBytes / 2);
  }

  const Value* find(std::uint64_t key) const {
    if (key == 0) return has_zero_ ? &zero_ : nullptr;
    if (count_ == 0) return nullptr;
    for (std::size_t i = home(key);; i = next(i)) {
      const Bucket& b = buckets_[i];
      for (std::size_t j = 0; j < kSlots; ++j) {
        if (b.keys[j] == key) return &b.values[j];
      }
      if (b.overflow == 0) return nullptr;
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
    if (Value* there = find(key)) return *there;
    if ((size_ + 1) * 4 > count_ * kSlots * 3) grow();
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
    const std::size_t i = (at - reinterpret_cast<std::uintptr_t>(buckets_)) / sizeof(Bucket);
    Bucket& b = buckets_[i];
    const std::size_t j = (at - reinterpret_cast<std::uintptr_t>(&b.values[0])) / sizeof(Value);
    // The buckets it passed on its way here no longer count it.
    for (std::size_t k = home(b.keys[j]); k != i; k = next(k)) --buckets_[k].overflow;
    b.keys[j] = 0;
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

  // The high half of the mixed key times the bucket count: a bucket in [0, count_), evenly.
  __extension__ using Wide = unsigned __int128;  // GCC and Clang; __extension__: -Wpedantic
  std::size_t home(std::uint64_t key) const {
    const std::uint64_t mixed = key * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>((static_cast<Wide>(mixed) * count_) >> 64);
  }
  std::size_t next(std::size_t i) const { return i + 1 == count_ ? 0 : i + 1; }

  // A key not in the table, with room for it: the first bucket from its home with a free slot.
  Value& place(std::uint64_t key) {
    for (std::size_t i = home(key);; i = next(i)) {
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

  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  static std::size_t bytes(std::size_t count) {
    const std::size_t raw = count * sizeof(Bucket);
    return raw >= kHugePage ? (raw + kHugePage - 1) / kHugePage * kHugePage : raw;
  }
  static std::align_val_t alignment(std::size_t count) {
    return std::align_val_t{bytes(count) >= kHugePage ? kHugePage : alignof(Bucket)};
  }
  static Bucket* allocate(std::size_t count) {
    void* p = ::operator new(bytes(count), alignment(count));
    // Advice only: without huge pages the table works the same, with more TLB misses.
    if (bytes(count) >= kHugePage) madvise(p, bytes(count), MADV_HUGEPAGE);
    Bucket* buckets = static_cast<Bucket*>(p);
    std::uninitialized_value_construct_n(buckets, count);
    return buckets;
  }
  static void deallocate(Bucket* buckets, std::size_t count) {
    if (buckets != nullptr) ::operator delete(buckets, alignment(count));
  }

  void grow() {
    const std::size_t old_count = count_;
    Bucket* old = std::exchange(buckets_, nullptr);
    count_ = old_count == 0 ? 4 : old_count + old_count / 2;
    buckets_ = allocate(count_);
    for (std::size_t i = 0; i < old_count; ++i) {
      for (std::size_t j = 0; j < kSlots; ++j) {
        if (old[i].keys[j] != 0) place(old[i].keys[j]) = old[i].values[j];
      }
    }
    deallocate(old, old_count);
  }

  Bucket* buckets_ = nullptr;
  std::size_t count_ = 0;  // buckets
  std::size_t size_ = 0;   // non-zero keys
  bool has_zero_ = false;
  Value zero_{};
};

}  // namespace prefixgate::gateway
