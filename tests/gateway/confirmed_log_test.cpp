// ConfirmedLog: a replica's list of the blocks it holds, swept a few entries at a time. Here the
// index's part (whether the replica holds a block, and the marks) is a plain model, so that what
// a sweep leaves can be checked exactly: each block held once, in the order first logged, no mark
// left, whatever the steps and whatever is appended between them.
#include "confirmed_log.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace prefixgate::gateway {
namespace {

struct HeldModel {
  std::set<std::uint64_t> held;
  std::set<std::uint64_t> marked;

  bool keep(std::uint64_t hash) {
    if (!held.contains(hash) || marked.contains(hash)) return false;
    marked.insert(hash);
    return true;
  }
  void unmark(std::uint64_t hash) { marked.erase(hash); }
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

// Random stores (appends of held blocks, repeats among them) and removals, with a sweep advanced
// by random steps between them; each finished sweep must leave exactly the first entry of each
// block held, in log order, and every mark cleared.
TEST(ConfirmedLogTest, ASweepInStepsLeavesEachHeldBlockOnceAndNoMark) {
  std::mt19937_64 rng(5);
  HeldModel model;
  ConfirmedLog log;
  int sweeps = 0;
  bool sweeping = false;
  std::size_t swept = 0;  // the log's length when the filtering ended
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t hash = 1 + rng() % 500;
    if (rng() % 3 != 0) {
      if (!model.held.contains(hash)) {
        model.held.insert(hash);
        log.append(hash);
      }
    } else {
      model.held.erase(hash);
    }
    if (!sweeping && log.sweep_due(model.held.size())) {
      log.start_sweep();
      sweeping = true;
    }
    if (!sweeping) continue;
    const bool filtering = log.phase() == ConfirmedLog::Phase::kFiltering;
    const bool done = log.advance(
        1 + rng() % 12, [&](std::uint64_t h) { return model.keep(h); },
        [&](std::uint64_t h) { model.unmark(h); }, [](std::uint64_t) {});
    if (filtering && log.phase() == ConfirmedLog::Phase::kUnmarking) swept = log.size();
    if (!done) continue;
    sweeping = false;
    ++sweeps;
    SCOPED_TRACE(::testing::Message() << "step " << step);
    ASSERT_TRUE(model.marked.empty());
    ASSERT_EQ(log.phase(), ConfirmedLog::Phase::kIdle);
    // What the filtering kept, each block once (those appended after it may repeat them, and
    // blocks removed after it looked may still be listed), and every block held now listed.
    const std::vector<std::uint64_t> now = listed(log);
    const std::set<std::uint64_t> kept(now.begin(),
                                       now.begin() + static_cast<std::ptrdiff_t>(swept));
    ASSERT_EQ(kept.size(), swept);
    const std::set<std::uint64_t> distinct(now.begin(), now.end());
    for (std::uint64_t h : model.held) ASSERT_TRUE(distinct.contains(h)) << h;
  }
  EXPECT_GT(sweeps, 20);
}

// Blocks held throughout come out of a sweep in the order they were first logged.
TEST(ConfirmedLogTest, ASweepKeepsTheFirstEntryOfEachBlockInOrder) {
  HeldModel model;
  model.held = {3, 5, 7};
  ConfirmedLog log;
  for (std::uint64_t h : {7, 1, 5, 7, 2, 3, 5, 7}) log.append(h);
  log.start_sweep();
  auto keep = [&](std::uint64_t h) { return model.keep(h); };
  auto unmark = [&](std::uint64_t h) { model.unmark(h); };
  auto prefetch = [](std::uint64_t) {};
  EXPECT_FALSE(log.advance(5, keep, unmark, prefetch));
  log.append(3);  // appended during the filtering: looked at, a repeat of 3 if 3 was kept
  log.append(4);  // not held
  int calls = 1;
  while (!log.advance(2, keep, unmark, prefetch)) ++calls;
  EXPECT_EQ(listed(log), (std::vector<std::uint64_t>{7, 5, 3}));
  EXPECT_TRUE(model.marked.empty());
  EXPECT_GE(calls, 4);  // (10 - 5) / 2 filtering, then 3 / 2 unmarking
}

}  // namespace
}  // namespace prefixgate::gateway
