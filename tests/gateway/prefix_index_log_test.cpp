// The prefix index's log of each replica's confirmed blocks (confirmed_log.h), as the index
// keeps and sweeps it: clears, resets and snapshots must take exactly a replica's blocks out of
// the index, whatever state the replicas' sweeps are in.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gateway/fleet_sim.h"
#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway {
namespace {

using testing::prompt_hashes;

std::vector<std::size_t> leading_runs(const PrefixIndex& index,
                                      const std::vector<std::uint64_t>& hashes) {
  std::vector<std::size_t> out(index.replica_count());
  index.longest_match(hashes, {}, out);
  return out;
}

// What a replica holds confirmed is listed in a log that a store appends to and a removal is
// noted in, swept of the removed blocks once their notes reach half of what the replica holds, a
// few entries for each cache event, one replica's log at a time; a clear, reset or snapshot walks
// it. Many thousands of stores, removals and stores again of a few blocks, so that every log is
// swept many times with repeats in it, while other replicas' events come between a sweep's steps,
// on replicas sharing those blocks (past four holders an entry keeps a bitmask row), with clears
// and snapshots now and then (some in the middle of a sweep), against a plain model; then each
// replica's clear must take exactly its own blocks out of the index.
TEST(PrefixIndexTest, ClearsAfterManySweepsOfTheConfirmedLogTakeExactlyTheReplicasBlocks) {
  constexpr std::size_t kReplicas = 7;
  PrefixIndex index;
  for (std::size_t r = 0; r < kReplicas; ++r) index.add_replica({});
  std::vector<std::set<std::uint64_t>> held(kReplicas);
  const std::vector<std::uint64_t> pool = prompt_hashes(9, 300);
  std::mt19937_64 rng(21);
  auto check = [&](int step) {
    std::set<std::uint64_t> all;
    for (std::size_t r = 0; r < kReplicas; ++r) {
      ASSERT_EQ(index.blocks(static_cast<ReplicaId>(r)), held[r].size())
          << "step " << step << " replica " << r;
      all.insert(held[r].begin(), held[r].end());
    }
    ASSERT_EQ(index.size(), all.size()) << "step " << step;
    // Prompts of 15 blocks, which longest_match walks block by block: exact on any holdings.
    for (std::size_t first = 0; first + 15 <= pool.size(); first += 15) {
      const std::vector<std::uint64_t> prompt(pool.begin() + first, pool.begin() + first + 15);
      const std::vector<std::size_t> matched = leading_runs(index, prompt);
      for (std::size_t r = 0; r < kReplicas; ++r) {
        std::size_t expect = 0;
        while (expect < prompt.size() && held[r].contains(prompt[expect])) ++expect;
        ASSERT_EQ(matched[r], expect) << "step " << step << " replica " << r;
      }
    }
  };
  for (int step = 0; step < 400000; ++step) {
    const auto r = static_cast<ReplicaId>(rng() % kReplicas);
    const std::uint64_t hash = pool[rng() % pool.size()];
    const std::uint64_t what = rng() % 10000;
    if (what < 1) {
      index.apply_cleared(r);
      held[r].clear();
    } else if (what < 2) {
      std::vector<std::uint64_t> snapshot;
      for (int i = 0; i < 50; ++i) snapshot.push_back(pool[rng() % pool.size()]);
      index.apply_snapshot(r, snapshot);
      held[r] = std::set<std::uint64_t>(snapshot.begin(), snapshot.end());
    } else if (what < 6000) {
      index.apply_stored(r, hash);
      held[r].insert(hash);
    } else {
      index.apply_removed(r, hash);
      held[r].erase(hash);
    }
    if (step % 5000 == 0 || what < 2) {
      check(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // A snapshot replaces one replica's blocks through the same walk.
  const std::vector<std::uint64_t> snapshot(pool.begin(), pool.begin() + 5);
  index.apply_snapshot(0, snapshot);
  held[0] = std::set<std::uint64_t>(snapshot.begin(), snapshot.end());
  check(-1);
  for (std::size_t r = 0; r < kReplicas; ++r) {
    index.apply_cleared(static_cast<ReplicaId>(r));
    held[r].clear();
    check(-2 - static_cast<int>(r));
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(index.size(), 0u);
}

// A clear in the middle of a sweep of the replica's log: the sweep has dropped entries in the
// middle of the log (stale copies of them are still there) and not reached its end. The clear must
// take every block the replica holds out (those the sweep kept and those it has not reached) and
// leave another replica's holdings of the same blocks as they were.
TEST(PrefixIndexTest, AClearInTheMiddleOfASweepTakesEveryBlockTheReplicaHolds) {
  PrefixIndex index;
  index.add_replica({});
  index.add_replica({});
  const std::vector<std::uint64_t> a = prompt_hashes(31, 3000);
  const std::vector<std::uint64_t> b = prompt_hashes(32, 200);
  // Replica 0 stores a, removes a[1000, 2700) and stores b. Its sweep comes due at the 1,683rd
  // removal (1,683 notes: half the 1,317 blocks then held, and 1,024) and starts with the first
  // store after (stores advance sweeps); by the last it has gathered the 1,700 notes and looked at
  // 200 x 16 - 1,700 = 1,500 entries: a[0, 1000) kept, a[1000, 1500) dropped, a[1500, 3000) and b
  // to come. It holds a[0, 1000) (looked at), a[2700, 3000) and b (not yet).
  auto fill = [&] {
    for (std::uint64_t h : a) index.apply_stored(0, h);
    for (std::size_t i = 1000; i < 2700; ++i) index.apply_removed(0, a[i]);
    for (std::uint64_t h : b) index.apply_stored(0, h);
    ASSERT_EQ(index.blocks(0), 1500u);
  };
  for (std::uint64_t h : a) index.apply_stored(1, h);
  fill();
  index.apply_cleared(0);
  EXPECT_EQ(index.blocks(0), 0u);
  EXPECT_EQ(index.size(), a.size());  // replica 1's, each once
  std::vector<std::size_t> matched(2);
  index.longest_match(a, {}, matched);
  EXPECT_EQ(matched[0], 0u);
  EXPECT_EQ(matched[1], a.size());
  index.longest_match(b, {}, matched);
  EXPECT_EQ(matched[0], 0u);

  // The sweep's multiset held the notes it had gathered and not yet met (a[1500, 2700)); the
  // clear must empty it, or the next sweep, replica 1's, would drop those blocks from its log
  // although replica 1 holds them, and its clear would then leave them in the index.
  for (std::size_t i = 0; i < 1700; ++i) index.apply_removed(1, a[i]);
  // Its sweep, gathering the 1,700 notes, runs to the end of the log (1,700 + 3,400 <= 400 x 16):
  // the stale copies of a pass that has not finished would still list the blocks.
  const std::vector<std::uint64_t> c = prompt_hashes(33, 400);
  for (std::uint64_t h : c) index.apply_stored(1, h);
  ASSERT_EQ(index.blocks(1), 1700u);
  index.apply_cleared(1);
  EXPECT_EQ(index.blocks(1), 0u);
  EXPECT_EQ(index.size(), 0u);

  // Again through a snapshot, which replaces the blocks through the same walk.
  fill();
  index.apply_snapshot(0, std::vector<std::uint64_t>(b.begin(), b.begin() + 10));
  EXPECT_EQ(index.blocks(0), 10u);
  EXPECT_EQ(index.size(), 10u);
}

}  // namespace
}  // namespace prefixgate::gateway
