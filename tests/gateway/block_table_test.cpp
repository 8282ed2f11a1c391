#include "block_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace prefixgate::gateway {
namespace {

TEST(BlockTableTest, FindsWhatWasInsertedAndNothingElse) {
  BlockTable<int> table;
  EXPECT_EQ(table.find(7), nullptr);
  EXPECT_FALSE(table.erase(7));
  table.prefetch(7);  // an empty table: nothing to touch
  table.try_emplace(7) = 70;
  table.try_emplace(0) = 1;  // key 0 is the empty marker inside, so it lives apart
  ASSERT_NE(table.find(7), nullptr);
  EXPECT_EQ(*table.find(7), 70);
  ASSERT_NE(table.find(0), nullptr);
  EXPECT_EQ(*table.find(0), 1);
  EXPECT_EQ(table.try_emplace(7), 70);  // already there: unchanged
  EXPECT_EQ(table.size(), 2U);
  EXPECT_TRUE(table.erase(0));
  EXPECT_EQ(table.find(0), nullptr);
  EXPECT_EQ(table.try_emplace(0), 0);  // value-initialized again
  EXPECT_EQ(table.size(), 2U);
}

// A 16-byte value, as the prefix index's entry: five slots a bucket where a uint64_t has seven.
struct Wide {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  bool operator==(const Wide&) const = default;
};

Wide value_of(std::uint64_t v, Wide*) {
  return {v, ~v};
}
std::uint64_t value_of(std::uint64_t v, std::uint64_t*) {
  return v;
}

// Random inserts and erases against std::unordered_map. Keys from a small range with many
// multiples of a power of two collide, fill buckets and run past the last one to the first, which
// is what the buckets' overflow counts (raised on the way in, lowered on the way out) must keep
// right; every find is checked, present keys and absent ones.
template <class V>
void random_operations_agree_with_a_standard_map() {
  for (std::uint64_t key_range : {40ULL, 3000ULL}) {
    BlockTable<V> table;
    std::unordered_map<std::uint64_t, V> model;
    std::mt19937_64 rng(key_range);
    for (int op = 0; op < 200000; ++op) {
      const std::uint64_t key = (rng() % key_range) << (op % 3 == 0 ? 32 : 0);
      if (rng() % 3 == 0) {
        // Half the erases by key, half through the value a find gave (key 0's included).
        const V* at = op % 2 == 0 ? table.find(key) : nullptr;
        if (at != nullptr) {
          table.erase_found(*at);
          ASSERT_EQ(model.erase(key), 1U) << "op " << op;
        } else {
          ASSERT_EQ(table.erase(key), model.erase(key) == 1) << "op " << op;
        }
      } else {
        const V value = value_of(rng(), static_cast<V*>(nullptr));
        table.try_emplace(key) = value;
        model[key] = value;
      }
      const std::uint64_t probe = (rng() % key_range) << (op % 2 == 0 ? 32 : 0);
      auto it = model.find(probe);
      const V* found = table.find(probe);
      ASSERT_EQ(found != nullptr, it != model.end()) << "op " << op << " key " << probe;
      if (found != nullptr) {
        ASSERT_EQ(*found, it->second) << "op " << op;
      }
      ASSERT_EQ(table.size(), model.size()) << "op " << op;
    }
    for (const auto& [key, value] : model) {
      const V* found = table.find(key);
      ASSERT_NE(found, nullptr);
      EXPECT_EQ(*found, value);
    }
  }
}

TEST(BlockTableTest, RandomOperationsAgreeWithAStandardMap) {
  random_operations_agree_with_a_standard_map<std::uint64_t>();
}

TEST(BlockTableTest, RandomOperationsWithTheIndexsEntrySizeAgreeWithAStandardMap) {
  random_operations_agree_with_a_standard_map<Wide>();
}

// While the table grows, its entries move from the old buckets to the new a few at a time: every
// operation in between sees one table. Keys are found in either, erased from either (by key and
// through a found value), inserted beside them, and the move ends with nothing lost, before the
// next growth. Sized past 2 MiB of buckets, so the mapped allocation is exercised too.
TEST(BlockTableTest, OperationsWhileGrowingSeeEveryKeyOnceWhicheverBucketsHoldIt) {
  BlockTable<std::uint64_t> table;
  std::unordered_map<std::uint64_t, std::uint64_t> model;
  const auto key = [](std::uint64_t i) { return (i * 0x9e3779b97f4a7c15ULL) | 1; };
  std::uint64_t next = 0;
  int growths = 0;
  std::mt19937_64 rng(7);
  while (model.size() < 300000) {
    const bool was_growing = table.growing();
    table.try_emplace(key(next)) = next;
    model[key(next)] = next;
    ++next;
    if (!was_growing && table.growing()) ++growths;
    if (!table.growing()) continue;
    // Mid-move: an old key and a recent one, found; one of each erased now and then.
    const std::uint64_t old_key = key(rng() % next);
    const auto it = model.find(old_key);
    const std::uint64_t* found = table.find(old_key);
    ASSERT_EQ(found != nullptr, it != model.end()) << old_key;
    if (found == nullptr) continue;
    ASSERT_EQ(*found, it->second);
    if (rng() % 4 == 0) {
      table.erase_found(*found);
      model.erase(it);
    } else if (rng() % 4 == 0) {
      ASSERT_TRUE(table.erase(old_key));
      model.erase(it);
    }
    ASSERT_EQ(table.size(), model.size());
  }
  EXPECT_GE(growths, 10);
  // The last growth's move finishes with inserts: then the old buckets are gone.
  while (table.growing()) {
    table.try_emplace(key(next)) = next;
    model[key(next)] = next;
    ++next;
  }
  EXPECT_GT(table.mapped_bytes(), 0U);
  ASSERT_EQ(table.size(), model.size());
  for (const auto& [k, v] : model) {
    const std::uint64_t* found = table.find(k);
    ASSERT_NE(found, nullptr) << k;
    EXPECT_EQ(*found, v);
  }
  for (std::uint64_t i = next; i < next + 10000; ++i) EXPECT_EQ(table.find(key(i)), nullptr);
}

// A full cache's churn at scale: the table kept at one size while its oldest keys are erased and
// new ones inserted, long enough for the buckets' overflow counts to come and go many times. At
// the end every live key is found, every erased one is not, and the counts are back where a
// table holding only the live keys would have them: an absent key's lookup stops as soon.
TEST(BlockTableTest, AChurnedTableFindsItsKeysAndForgetsTheErasedOnes) {
  BlockTable<std::uint64_t> table;
  constexpr std::uint64_t kLive = 20000;
  const auto key = [](std::uint64_t i) { return (i * 0x9e3779b97f4a7c15ULL) | 1; };
  for (std::uint64_t i = 0; i < kLive; ++i) table.try_emplace(key(i)) = i;
  for (std::uint64_t i = kLive; i < 20 * kLive; ++i) {
    table.try_emplace(key(i)) = i;
    ASSERT_TRUE(table.erase(key(i - kLive)));
  }
  EXPECT_EQ(table.size(), kLive);
  for (std::uint64_t i = 19 * kLive; i < 20 * kLive; ++i) {
    const std::uint64_t* v = table.find(key(i));
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(*v, i);
  }
  for (std::uint64_t i = 0; i < 19 * kLive; i += 97) EXPECT_EQ(table.find(key(i)), nullptr) << i;
  // Erasing the rest leaves no count behind: a table emptied this way is an empty table.
  for (std::uint64_t i = 19 * kLive; i < 20 * kLive; ++i) ASSERT_TRUE(table.erase(key(i)));
  EXPECT_EQ(table.size(), 0U);
  EXPECT_EQ(table.overflow_total(), 0U);
}

}  // namespace
}  // namespace prefixgate::gateway
