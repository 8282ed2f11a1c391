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

// Random inserts and erases against std::unordered_map. Keys from a small range with many
// multiples of a power of two collide and wrap around the end of the array, which is what the
// backward shift on erase has to get right.
TEST(BlockTableTest, RandomOperationsAgreeWithAStandardMap) {
  for (std::uint64_t key_range : {40ULL, 3000ULL}) {
    BlockTable<std::uint64_t> table;
    std::unordered_map<std::uint64_t, std::uint64_t> model;
    std::mt19937_64 rng(key_range);
    for (int op = 0; op < 200000; ++op) {
      const std::uint64_t key = (rng() % key_range) << (op % 3 == 0 ? 32 : 0);
      if (rng() % 3 == 0) {
        // Half the erases by key, half through the value a find gave (key 0's included).
        const std::uint64_t* at = op % 2 == 0 ? table.find(key) : nullptr;
        if (at != nullptr) {
          table.erase_found(*at);
          ASSERT_EQ(model.erase(key), 1U) << "op " << op;
        } else {
          ASSERT_EQ(table.erase(key), model.erase(key) == 1) << "op " << op;
        }
      } else {
        const std::uint64_t value = rng();
        table.try_emplace(key) = value;
        model[key] = value;
      }
      const std::uint64_t probe = (rng() % key_range) << (op % 2 == 0 ? 32 : 0);
      auto it = model.find(probe);
      const std::uint64_t* found = table.find(probe);
      ASSERT_EQ(found != nullptr, it != model.end()) << "op " << op << " key " << probe;
      if (found != nullptr) {
        ASSERT_EQ(*found, it->second) << "op " << op;
      }
      ASSERT_EQ(table.size(), model.size()) << "op " << op;
    }
    for (const auto& [key, value] : model) {
      const std::uint64_t* found = table.find(key);
      ASSERT_NE(found, nullptr);
      EXPECT_EQ(*found, value);
    }
  }
}

}  // namespace
}  // namespace prefixgate::gateway
