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

// What a replica holds confirmed is listed in a log that a store appends to and a removal leaves,
// swept of the blocks no longer held and of repeats once it is twice what the replica holds, a
// few entries for each store, one replica's log at a time; a clear, reset or snapshot walks it.
// Many thousands of stores, removals and stores again of a few blocks, so that every log is swept
// many times with repeats in it, while other replicas' events come between a sweep's steps, on
// replicas sharing those blocks (past four holders an entry keeps a bitmask row), with clears and
// snapshots now and then (some in the middle of a sweep), against a plain model; then each
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

// A clear in the middle of a sweep of the replica's log that drops repeats: that pass has marked
// the blocks it kept so far. The clear must take all of the replica's blocks out and leave no mark
// behind, or a later sweep of another replica's log would take a marked block it holds for a
// repeat, drop it, and that replica's clear would then leave the block in the index.
TEST(PrefixIndexTest, AClearInTheMiddleOfASweepTakesEveryBlockAndLeavesNoMark) {
  PrefixIndex index;
  index.add_replica({});
  index.add_replica({});
  const std::vector<std::uint64_t> a = prompt_hashes(31, 2000);
  const std::vector<std::uint64_t> b = prompt_hashes(32, 2000);
  const std::vector<std::uint64_t> c = prompt_hashes(33, 3000);
  const std::vector<std::uint64_t> d = prompt_hashes(34, 1000);
  auto store = [&](ReplicaId r, const std::vector<std::uint64_t>& hashes, std::size_t first,
                   std::size_t last) {
    for (std::size_t i = first; i < last; ++i) index.apply_stored(r, hashes[i]);
  };
  auto remove = [&](ReplicaId r, const std::vector<std::uint64_t>& hashes, std::size_t first,
                    std::size_t last) {
    for (std::size_t i = first; i < last; ++i) index.apply_removed(r, hashes[i]);
  };
  store(1, a, 0, 2000);
  // Replica 0's log: a[0, 2000), then a[0, 1000) again (removed and stored: repeats), of which it
  // keeps a[0, 500). Its next store makes a sweep due; the pass that drops what is not held keeps
  // 1,000 entries for 500 blocks, so a pass that drops repeats follows, marking a[0, 500).
  store(0, a, 0, 2000);
  remove(0, a, 0, 1000);
  store(0, a, 0, 1000);
  remove(0, a, 500, 2000);
  store(0, b, 0, 500);  // eight entries a store: about 430 to the first pass's end, then marking
  ASSERT_EQ(index.blocks(0), 1000u);
  index.apply_cleared(0);
  EXPECT_EQ(index.blocks(0), 0u);
  EXPECT_EQ(index.size(), a.size());  // replica 1's, each once

  // Replica 1's log with many repeats of d (stored three times), and a[0, 500), which replica 0's
  // sweep marked, held all along: its pass that drops repeats must keep a[0, 500).
  for (int round = 0; round < 3; ++round) {
    if (round > 0) remove(1, d, 0, 1000);
    store(1, d, 0, 1000);
  }
  remove(1, a, 500, 2000);
  store(1, c, 0, 3000);  // enough stores for its sweep to finish
  ASSERT_EQ(index.blocks(1), 4500u);
  index.apply_cleared(1);
  EXPECT_EQ(index.blocks(1), 0u);
  EXPECT_EQ(index.size(), 0u);
}

}  // namespace
}  // namespace prefixgate::gateway
