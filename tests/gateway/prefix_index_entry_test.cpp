// The index's 16-byte block entry keeps six flag bits in the top two bits of its four words,
// beside up to four 30-bit replica ids (or a dense row and count). Random sequences of its
// operations against a plain model: a change to one field must leave every other field as it was,
// with ids that use all 30 bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "prefix_index_impl.h"

namespace prefixgate::gateway::prefix_index_detail {
namespace {

struct EntryModel {
  std::vector<ReplicaId> holders;  // inline
  bool dense = false;
  std::uint32_t row = 0;
  std::uint32_t dense_count = 0;
  bool predicted = false;
  bool offloaded = false;
};

void expect_entry_matches(const Entry& e, const EntryModel& m, int trial, int step) {
  SCOPED_TRACE(::testing::Message() << "trial " << trial << " step " << step);
  ASSERT_EQ(e.dense(), m.dense);
  ASSERT_EQ(e.predicted(), m.predicted);
  ASSERT_EQ(e.offloaded(), m.offloaded);
  if (m.dense) {
    ASSERT_EQ(e.row(), m.row);
    ASSERT_EQ(e.count(), m.dense_count);
    return;
  }
  ASSERT_EQ(e.count(), m.holders.size());
  for (std::uint32_t i = 0; i < m.holders.size(); ++i) ASSERT_EQ(e.holder(i), m.holders[i]);
}

TEST(PrefixIndexEntryTest, EachOperationChangesOnlyItsOwnField) {
  std::mt19937_64 rng(3);
  // Ids at both ends of the 30 bits, and between.
  auto id = [&] {
    switch (rng() % 3) {
      case 0: return kMaxReplicas - 1 - static_cast<std::uint32_t>(rng() % 4);
      case 1: return static_cast<std::uint32_t>(rng() % 4);
      default: return static_cast<std::uint32_t>(rng() % kMaxReplicas);
    }
  };
  for (int trial = 0; trial < 2000; ++trial) {
    Entry e;
    EntryModel m;
    for (int step = 0; step < 40; ++step) {
      switch (rng() % 7) {
        case 0:
          if (!m.dense && m.holders.size() < kInlineHolders) {
            const ReplicaId r = id();
            e.push(r);
            m.holders.push_back(r);
          }
          break;
        case 1:
          if (!m.dense && !m.holders.empty()) {
            const auto i = static_cast<std::uint32_t>(rng() % m.holders.size());
            e.erase(i);
            m.holders[i] = m.holders.back();
            m.holders.pop_back();
          }
          break;
        case 2:
          if (!m.dense) {
            m.row = id();
            m.dense_count = id();
            e.make_dense(m.row, m.dense_count);
            m.dense = true;
            m.holders.clear();
          }
          break;
        case 3:
          if (m.dense) {
            m.dense_count = id();
            e.set_dense_count(m.dense_count);
          }
          break;
        case 4:
          if (m.dense) {
            e.make_empty();
            m.dense = false;
          }
          break;
        case 5:
          m.predicted = !m.predicted;
          e.set_predicted(m.predicted);
          break;
        default:
          m.offloaded = !m.offloaded;
          e.set_offloaded(m.offloaded);
          break;
      }
      expect_entry_matches(e, m, trial, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace prefixgate::gateway::prefix_index_detail
