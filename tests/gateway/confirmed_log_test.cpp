// ConfirmedLog: a replica's list of the blocks it holds, swept a few entries at a time. Here the
// index's part (whether the replica holds a block, and the marks) is a plain model, so that what
// a sweep leaves can be checked exactly, whatever the steps and whatever is appended or removed
// between them: every block held listed, no mark left, and the repeats dropped once there are
// more than a pass leaves.
#include "confirmed_log.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace prefixgate::gateway {
namespace {

struct BlocksModel {
  std::set<std::uint64_t> holds;
  std::set<std::uint64_t> marked;
  int prefetched = 0;

  bool held(std::uint64_t hash) const { return holds.contains(hash); }
  bool held_first(std::uint64_t hash) {
    if (!holds.contains(hash) || marked.contains(hash)) return false;
    marked.insert(hash);
    return true;
  }
  void unmark(std::uint64_t hash) { marked.erase(hash); }
  void prefetch(std::uint64_t) { ++prefetched; }
};

std::vector<std::uint64_t> listed(const ConfirmedLog& log) {
  return {log.entries().begin(), log.entries().end()};
}

TEST(ConfirmedLogTest, ASweepIsDueAtTwiceWhatIsHeldPastTheMinimum) {
  ConfirmedLog log;
  for (std::uint64_t h = 0; h < ConfirmedLog::kMinSwept - 1; ++h) log.append(h);
  EXPECT_FALSE(log.sweep_due(0));
  log.append(9999);
  EXPECT_TRUE(log.sweep_due(0));
  EXPECT_FALSE(log.sweep_due(1));
  for (std::uint64_t h = 0; h < 200; ++h) log.append(h);
  EXPECT_TRUE(log.sweep_due(100));
  EXPECT_FALSE(log.sweep_due(101));
  log.set_waiting();  // due once: a log waiting or sweeping is not due again
  EXPECT_FALSE(log.sweep_due(0));
}

// A pass drops what is not held and keeps the rest in order; with few repeats it ends there.
TEST(ConfirmedLogTest, APassDropsTheBlocksNoLongerHeldAndKeepsTheOrder) {
  BlocksModel blocks;
  blocks.holds = {3, 5, 7};
  ConfirmedLog log;
  for (std::uint64_t h : {7, 1, 5, 7, 2, 3, 5, 7}) log.append(h);
  log.start_sweep();
  EXPECT_FALSE(log.advance(5, blocks.holds.size(), blocks));
  log.append(3);  // appended during the pass: looked at too
  log.append(4);  // not held
  int calls = 1;
  while (!log.advance(2, blocks.holds.size(), blocks)) ++calls;
  EXPECT_EQ(listed(log), (std::vector<std::uint64_t>{7, 5, 7, 3, 5, 7, 3}));  // few repeats: kept
  EXPECT_EQ(calls, 3);  // (10 - 5) / 2, rounded up
  EXPECT_GT(blocks.prefetched, 0);
  EXPECT_EQ(log.phase(), ConfirmedLog::Phase::kIdle);
}

// Past kMinRepeats repeats, the passes that drop them follow: each block once, its first entry,
// and every mark cleared.
TEST(ConfirmedLogTest, ManyRepeatsAreDroppedKeepingEachBlocksFirstEntry) {
  BlocksModel blocks;
  ConfirmedLog log;
  for (int round = 0; round < 10; ++round) {
    for (std::uint64_t h = 10; h >= 1; --h) log.append(h);
  }
  log.append(11);
  blocks.holds = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 11 is not held
  log.start_sweep();
  bool deduped = false;
  while (!log.advance(7, blocks.holds.size(), blocks)) {
    deduped = deduped || log.phase() == ConfirmedLog::Phase::kDeduping;
  }
  EXPECT_TRUE(deduped);
  EXPECT_EQ(listed(log), (std::vector<std::uint64_t>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_TRUE(blocks.marked.empty());
}

// Random stores (appends of blocks newly held, repeats among them) and removals, with a sweep
// advanced by random steps between them; each finished sweep must leave every block held listed,
// no mark set, and no more entries than its last pass allows.
TEST(ConfirmedLogTest, ASweepInStepsListsEveryHeldBlockAndLeavesNoMark) {
  std::mt19937_64 rng(5);
  BlocksModel blocks;
  ConfirmedLog log;
  int sweeps = 0, dedupes = 0;
  bool sweeping = false;
  for (int step = 0; step < 300000; ++step) {
    const std::uint64_t hash = 1 + rng() % 500;
    if (rng() % 3 != 0) {
      if (!blocks.holds.contains(hash)) {
        blocks.holds.insert(hash);
        log.append(hash);
      }
    } else {
      blocks.holds.erase(hash);
    }
    if (!sweeping && log.sweep_due(blocks.holds.size())) {
      log.start_sweep();
      sweeping = true;
    }
    if (!sweeping) continue;
    const ConfirmedLog::Phase before = log.phase();
    const bool done = log.advance(1 + rng() % 12, blocks.holds.size(), blocks);
    if (before == ConfirmedLog::Phase::kUnmarking && done) ++dedupes;
    if (!done) continue;
    sweeping = false;
    ++sweeps;
    SCOPED_TRACE(::testing::Message() << "step " << step);
    ASSERT_TRUE(blocks.marked.empty());
    ASSERT_EQ(log.phase(), ConfirmedLog::Phase::kIdle);
    const std::vector<std::uint64_t> now = listed(log);
    const std::set<std::uint64_t> distinct(now.begin(), now.end());
    for (std::uint64_t h : blocks.holds) ASSERT_TRUE(distinct.contains(h)) << h;
    ASSERT_LE(now.size(), blocks.holds.size() + blocks.holds.size() / ConfirmedLog::kRepeatShare +
                              ConfirmedLog::kMinRepeats);
  }
  EXPECT_GT(sweeps, 20);
  EXPECT_GT(dedupes, 0);
}

}  // namespace
}  // namespace prefixgate::gateway
