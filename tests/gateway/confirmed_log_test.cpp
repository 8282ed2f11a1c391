// ConfirmedLog: a replica's list of the blocks it holds, its removals noted apart and settled by
// a sweep a few entries at a time. What a sweep leaves is checked exactly against a plain model,
// whatever the steps and whatever is appended or removed between them: every block held listed
// once, no block not held listed without a removal noted for it. And HashMultiset, the table of
// noted removals, against std::multiset.
#include "confirmed_log.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "hash_multiset.h"

namespace prefixgate::gateway {
namespace {

std::vector<std::uint64_t> listed(const ConfirmedLog& log) {
  return {log.entries().begin(), log.entries().end()};
}

// Removals noted, each a copy; the hash 0 (an empty slot's mark) among them; runs of colliding
// homes (small integers times 2^58 share the top bits) so that erases move later slots back.
TEST(HashMultisetTest, RandomInsertsAndErasesAgreeWithStdMultiset) {
  std::mt19937_64 rng(3);
  HashMultiset set;
  std::multiset<std::uint64_t> model;
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t pick = rng() % 600;
    const std::uint64_t hash = pick < 50 ? pick << 58 : pick < 60 ? 0 : rng() % 3000;
    if (rng() % 2 == 0) {
      set.insert(hash);
      model.insert(hash);
    } else {
      const auto it = model.find(hash);
      ASSERT_EQ(set.erase_one(hash), it != model.end()) << "step " << step << " hash " << hash;
      if (it != model.end()) model.erase(it);
    }
    ASSERT_EQ(set.size(), model.size());
    if (step % 1000 == 0) {  // every copy still found, and no more than there are
      std::multiset<std::uint64_t> left = model;
      for (std::uint64_t h : model) ASSERT_TRUE(set.erase_one(h)) << h;
      ASSERT_TRUE(set.empty());
      for (std::uint64_t h : left) set.insert(h);
    }
  }
  // Emptied, it keeps its slots, all free again.
  const std::size_t capacity = set.capacity();
  EXPECT_GT(capacity, 0u);
  set.clear();
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.capacity(), capacity);
  for (std::uint64_t h = 1; h <= capacity / 2; ++h) set.insert(h);
  EXPECT_EQ(set.capacity(), capacity);
  for (std::uint64_t h = 1; h <= capacity / 2; ++h) ASSERT_TRUE(set.erase_one(h)) << h;
  EXPECT_FALSE(set.erase_one(1));
}

TEST(ConfirmedLogTest, ASweepIsDueOnceTheRemovalsReachHalfOfWhatIsHeldPastTheMinimum) {
  static_assert(ConfirmedLog::kRemovedShare == 2);
  ConfirmedLog log;
  for (std::uint64_t h = 0; h < ConfirmedLog::kMinSwept - 1; ++h) log.note_removed(h);
  EXPECT_FALSE(log.sweep_due(0));
  log.note_removed(9999);
  EXPECT_TRUE(log.sweep_due(0));
  EXPECT_TRUE(log.sweep_due(1));
  EXPECT_FALSE(log.sweep_due(2));
  for (std::uint64_t h = 0; h < 100; ++h) log.note_removed(h);
  EXPECT_TRUE(log.sweep_due(201));
  EXPECT_FALSE(log.sweep_due(202));
  log.set_waiting();  // due once: a log waiting or sweeping is not due again
  EXPECT_FALSE(log.sweep_due(0));
  log.clear();  // still in the index's queue: stays waiting
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kWaiting);
}

// A sweep gathers the notes it starts with, then drops one entry for each and keeps the rest in
// order, the entries appended meanwhile included; a note made during the sweep waits for the
// next one.
TEST(ConfirmedLogTest, ASweepDropsAnEntryForEachRemovalAndKeepsTheOrder) {
  ConfirmedLog log;
  HashMultiset removed;
  // Stored 7, 1, 5; removed 1 and 7; stored 7 again: held 5 and 7.
  for (std::uint64_t h : {7, 1, 5}) log.append(h);
  log.note_removed(1);
  log.note_removed(7);
  log.append(7);
  log.start_sweep(removed);
  EXPECT_FALSE(log.advance(3, removed));  // gathers both notes, looks at 7
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kDropping);
  log.append(8);
  log.note_removed(5);  // made during the sweep: settled by the next
  int calls = 1;
  while (!log.advance(1, removed)) ++calls;
  EXPECT_EQ(calls, 4);  // 1, 5, 7, 8 one at a time
  EXPECT_EQ(listed(log), (std::vector<std::uint64_t>{5, 7, 8}));
  EXPECT_EQ((log.notes() + removed.size()), 1u);
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kIdle);
  log.start_sweep(removed);
  while (!log.advance(2, removed)) {
  }
  EXPECT_EQ(listed(log), (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ((log.notes() + removed.size()), 0u);
}

// Random stores (appends of blocks newly held, repeats among them) and removals, with a sweep
// advanced by random steps between them. After each finished sweep the log less its notes is
// exactly what is held: each block held listed, and the entries past one a block held (or past
// none) as many as the removals noted.
TEST(ConfirmedLogTest, TheLogLessItsRemovalsIsExactlyWhatIsHeldAfterEverySweep) {
  std::mt19937_64 rng(5);
  std::set<std::uint64_t> holds;
  ConfirmedLog log;
  HashMultiset removed;
  int sweeps = 0;
  for (int step = 0; step < 300000; ++step) {
    const std::uint64_t hash = 1 + rng() % 3000;
    if (rng() % 2 == 0) {
      if (holds.contains(hash)) continue;
      holds.insert(hash);
      log.append(hash);
    } else {
      if (!holds.contains(hash)) continue;
      holds.erase(hash);
      log.note_removed(hash);
    }
    if (log.sweep_due(holds.size())) log.start_sweep(removed);
    if (log.phase() == ConfirmedLog::Phase::kIdle || !log.advance(1 + rng() % 12, removed))
      continue;
    ++sweeps;
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::map<std::uint64_t, std::size_t> count;
    for (std::uint64_t h : listed(log)) ++count[h];
    std::size_t past_held = 0;
    for (const auto& [h, n] : count) {
      const std::size_t held = holds.contains(h) ? 1 : 0;
      ASSERT_GE(n, held) << h;
      past_held += n - held;
    }
    for (std::uint64_t h : holds) ASSERT_TRUE(count.contains(h)) << h;
    ASSERT_EQ((log.notes() + removed.size()), past_held);
    // A sweep keeps up: what it left to the next is far from due again.
    ASSERT_FALSE(log.sweep_due(holds.size()));
  }
  EXPECT_GT(sweeps, 20);
}

// A replica holding millions of blocks is swept once kMaxGathered notes wait, and a sweep gathers
// no more than that, so the multiset never grows past the room made for it at the first sweep.
TEST(ConfirmedLogTest, ASweepGathersAtMostTheMultisetsRoom) {
  constexpr std::size_t kMax = ConfirmedLog::kMaxGathered;
  ConfirmedLog log;
  HashMultiset removed;
  for (std::uint64_t h = 1; h <= kMax + 100; ++h) log.append(h);
  for (std::uint64_t h = 1; h < kMax; ++h) log.note_removed(h);
  EXPECT_FALSE(log.sweep_due(10'000'000));
  log.note_removed(kMax);
  EXPECT_TRUE(log.sweep_due(10'000'000));
  for (std::uint64_t h = kMax + 1; h <= kMax + 100; ++h) log.note_removed(h);  // held: none
  log.start_sweep(removed);
  const std::size_t capacity = removed.capacity();
  EXPECT_GE(capacity, 2 * kMax);
  while (!log.advance(4096, removed)) {
  }
  EXPECT_EQ(removed.capacity(), capacity);
  EXPECT_EQ(log.notes(), 100u);  // for the next sweep
  std::vector<std::uint64_t> expect;
  for (std::uint64_t h = kMax + 1; h <= kMax + 100; ++h) expect.push_back(h);
  EXPECT_EQ(listed(log), expect);
}

// A pass under way has a dropped region in the middle of the log; the log still lists every
// block held (those the pass kept and those it has not reached), so that the index can walk it
// for a clear at any time.
TEST(ConfirmedLogTest, InTheMiddleOfASweepTheLogStillListsEveryBlockHeld) {
  ConfirmedLog log;
  HashMultiset removed;
  for (std::uint64_t h = 1; h <= 3000; ++h) log.append(h);
  for (std::uint64_t h = 1001; h <= 2500; ++h) log.note_removed(h);  // held: 1-1000, 2501-3000
  log.start_sweep(removed);
  EXPECT_FALSE(log.advance(1500 + 1800, removed));  // the notes, then 1-1800
  const std::vector<std::uint64_t> now = listed(log);
  const std::set<std::uint64_t> distinct(now.begin(), now.end());
  for (std::uint64_t h = 1; h <= 3000; ++h) {
    if (h <= 1000 || h > 2500) {
      EXPECT_TRUE(distinct.contains(h)) << h;
    }
  }
  EXPECT_EQ((log.notes() + removed.size()), 1500u - 800u);  // 1001-1800 settled
  while (!log.advance(100, removed)) {
  }
  std::vector<std::uint64_t> expect;
  for (std::uint64_t h = 1; h <= 3000; ++h) {
    if (h <= 1000 || h > 2500) expect.push_back(h);
  }
  EXPECT_EQ(listed(log), expect);
  EXPECT_EQ((log.notes() + removed.size()), 0u);
  log.note_removed(1);
  log.note_removed(2);
  log.start_sweep(removed);
  EXPECT_FALSE(log.advance(3, removed));  // both notes gathered; entry 1 met, 2 not yet
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kDropping);
  EXPECT_EQ(removed.size(), 1u);
  log.clear();  // a sweep under way is forgotten with the rest (the caller empties `removed`)
  EXPECT_TRUE(log.entries().empty());
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kIdle);
  EXPECT_EQ(log.notes(), 0u);
}

}  // namespace
}  // namespace prefixgate::gateway
