#include "prefixgate/gateway/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "gateway/fleet_sim.h"

namespace prefixgate::gateway {
namespace {

using std::chrono::milliseconds;
using testing::prompt_hashes;

std::vector<std::size_t> match(const PrefixIndex& index, const std::vector<std::uint64_t>& hashes,
                               Clock::time_point now = {}) {
  std::vector<std::size_t> out(index.replica_count());
  index.longest_match(hashes, now, out);
  return out;
}

void store(PrefixIndex& index, ReplicaId r, const std::vector<std::uint64_t>& hashes,
           std::size_t first, std::size_t last) {
  for (std::size_t i = first; i < last; ++i) index.apply_stored(r, hashes[i]);
}

TEST(PrefixIndexTest, ConfirmedBlocksGiveTheLeadingRunPerReplica) {
  PrefixIndex index;
  for (int i = 0; i < 3; ++i) index.add_replica({});
  const auto h = prompt_hashes(1, 8);
  store(index, 0, h, 0, 8);
  store(index, 1, h, 0, 3);
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{8, 3, 0}));
  EXPECT_EQ(index.blocks(0), 8U);
  EXPECT_EQ(index.blocks(1), 3U);
  EXPECT_EQ(index.size(), 8U);
}

TEST(PrefixIndexTest, MatchStopsAtTheFirstGapPerReplica) {
  PrefixIndex index;
  for (int i = 0; i < 2; ++i) index.add_replica({});
  const auto h = prompt_hashes(1, 6);
  for (std::size_t i : {0, 1, 3, 4, 5}) index.apply_stored(0, h[i]);  // no block 2
  for (std::size_t i : {1, 2}) index.apply_stored(1, h[i]);           // no block 0
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{2, 0}));
}

TEST(PrefixIndexTest, EventsOutOfOrderStillMatch) {
  PrefixIndex index;
  index.add_replica({});
  const auto h = prompt_hashes(1, 5);
  for (std::size_t i = 5; i-- > 0;) index.apply_stored(0, h[i]);  // children before parents
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{5}));
}

TEST(PrefixIndexTest, PredictionMatchesUntilItsTtl) {
  PrefixIndex index({milliseconds(2000), milliseconds(2000)});  // ttl from routing
  index.add_replica({});
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  const Clock::time_point t0{};
  index.predict(1, h, t0);
  EXPECT_EQ(match(index, h, t0 + milliseconds(1999)), (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(2000)), (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(index.blocks(1), 4U);  // expired but not yet dropped
  index.expire_predictions(t0 + milliseconds(2000));
  EXPECT_EQ(index.blocks(1), 0U);
  EXPECT_EQ(index.size(), 0U);
}

// A request may queue far longer than prediction_ttl on a loaded replica: its prediction lives
// until its first token (settle), then prediction_ttl more, so its siblings still find it.
TEST(PrefixIndexTest, APredictionLivesUntilItsRequestIsPrefilledThenItsTtl) {
  PrefixIndex index({milliseconds(2000), milliseconds(60000)});
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  const Clock::time_point t0{};
  index.predict(0, h, t0);  // request A
  EXPECT_EQ(match(index, h, t0 + milliseconds(12000)), (std::vector<std::size_t>{4}));
  index.predict(0, h, t0 + milliseconds(12000));  // request B, same prompt, also pending
  index.settle(0, h, t0 + milliseconds(13000));   // A's first token
  EXPECT_EQ(match(index, h, t0 + milliseconds(20000)), (std::vector<std::size_t>{4}))
      << "B still waits: its prediction stays";
  index.settle(0, h, t0 + milliseconds(21000));  // B's first token
  EXPECT_EQ(match(index, h, t0 + milliseconds(22999)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(23000)), (std::vector<std::size_t>{0}));
  index.expire_predictions(t0 + milliseconds(23000));
  EXPECT_EQ(index.blocks(0), 0U);
  // Settling what was never predicted (or already settled) creates nothing.
  index.settle(0, h, t0 + milliseconds(23000));
  EXPECT_EQ(index.blocks(0), 0U);
  // A request whose first token never comes is forgotten after max_prefill_wait.
  index.predict(0, h, t0 + milliseconds(30000));
  EXPECT_EQ(match(index, h, t0 + milliseconds(89999)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(90000)), (std::vector<std::size_t>{0}));
  index.expire_predictions(t0 + milliseconds(90000));
  EXPECT_EQ(index.size(), 0U);
}

// predict() says where its predictions began; settle() given that starts there, so a block held
// confirmed when the request was routed, evicted since and predicted by another request, keeps
// that request's pending count instead of being settled by this one's first token.
TEST(PrefixIndexTest, SettlingStartsWherePredictingBeganSoAnotherRequestsBlockStaysPending) {
  PrefixIndex index({milliseconds(2000), milliseconds(60000)});
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  const Clock::time_point t0{};
  store(index, 0, h, 0, 3);
  const std::size_t a_from = index.predict(0, h, t0);  // request A: block 3 predicted
  EXPECT_EQ(a_from, 3U);
  index.apply_removed(0, h[2]);
  const std::size_t b_from = index.predict(0, h, t0 + milliseconds(1000));  // B: blocks 2 and 3
  EXPECT_EQ(b_from, 2U);
  index.settle(0, h, t0 + milliseconds(2000), a_from);  // A's first token
  EXPECT_EQ(match(index, h, t0 + milliseconds(5000)), (std::vector<std::size_t>{4}))
      << "B still waits: its predictions of blocks 2 and 3 stay past A's settle + TTL";
  index.settle(0, h, t0 + milliseconds(6000), b_from);  // B's first token
  EXPECT_EQ(match(index, h, t0 + milliseconds(7999)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(8000)), (std::vector<std::size_t>{2}));
}

TEST(PrefixIndexTest, SettlingWithoutWherePredictingBeganSearchesTheConfirmedRunAgain) {
  PrefixIndex index({milliseconds(2000), milliseconds(60000)});
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  const Clock::time_point t0{};
  store(index, 0, h, 0, 2);
  EXPECT_EQ(index.predict(0, h, t0), 2U);
  store(index, 0, h, 2, 3);  // confirmed while the request waited: no prediction left there
  index.settle(0, h, t0 + milliseconds(1000));
  EXPECT_EQ(match(index, h, t0 + milliseconds(2999)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(3000)), (std::vector<std::size_t>{3}));
}

// Predictions made with clock readings out of order (threads read the clock before they take
// the routing lock) still expire each at its own time, pending and settled ones alike.
TEST(PrefixIndexTest, PredictionsMadeOutOfTimeOrderExpireEachAtItsOwnTime) {
  PrefixIndex index({milliseconds(2000), milliseconds(60000)});
  index.add_replica({});
  const auto a = prompt_hashes(1, 4), b = prompt_hashes(2, 4), c = prompt_hashes(3, 4);
  const Clock::time_point t0{};
  index.predict(0, a, t0 + milliseconds(10000));
  index.predict(0, b, t0 + milliseconds(5000));  // earlier than a's routing
  index.predict(0, c, t0 + milliseconds(7000));
  index.expire_predictions(t0 + milliseconds(65000));
  EXPECT_EQ(match(index, b), (std::vector<std::size_t>{0})) << "b's wait is over";
  EXPECT_EQ(match(index, c), (std::vector<std::size_t>{4})) << "c still waits until 67 s";
  EXPECT_EQ(match(index, a), (std::vector<std::size_t>{4})) << "a still waits until 70 s";
  index.settle(0, a, t0 + milliseconds(66000));  // a: TTL from 66 s
  index.settle(0, c, t0 + milliseconds(65500));  // c: from 65.5 s, settled after a
  index.expire_predictions(t0 + milliseconds(67500));
  EXPECT_EQ(match(index, c), (std::vector<std::size_t>{0}));
  EXPECT_EQ(match(index, a), (std::vector<std::size_t>{4}));
  index.expire_predictions(t0 + milliseconds(68000));
  EXPECT_EQ(index.size(), 0U);
}

// predict() and settle() skip the leading run a replica holds confirmed (searched for on long
// prompts): whatever that run's length, every block after it is predicted, and each of those
// predictions is settled when its request's first token comes, including when the engine
// confirmed more of the prompt in between.
TEST(PrefixIndexTest, PredictAndSettleCoverEveryBlockAfterTheConfirmedRun) {
  for (const std::size_t n : {30, 64, 200, 1000}) {
    for (const std::size_t run : {0, 1, 2, 31, 63, 64, 65, 127, 128, 199, 200, 999, 1000}) {
      if (run > n) continue;
      for (const std::size_t confirmed_later : {0, 1, 17}) {
        SCOPED_TRACE(::testing::Message() << n << " blocks, " << run << " confirmed, "
                                          << confirmed_later << " more before the first token");
        PrefixIndex index({milliseconds(2000), milliseconds(60000)});
        index.add_replica({});
        const auto h = prompt_hashes(7, n);
        store(index, 0, h, 0, run);
        const Clock::time_point t0{};
        index.predict(0, h, t0);
        EXPECT_EQ(match(index, h, t0), (std::vector<std::size_t>{n}));
        EXPECT_EQ(index.blocks(0), n);
        const std::size_t confirmed = std::min(n, run + confirmed_later);
        store(index, 0, h, run, confirmed);
        index.settle(0, h, t0 + milliseconds(1000));
        // Settled: the predictions expire 2 s after the first token, not 60 s after routing.
        index.expire_predictions(t0 + milliseconds(3000));
        EXPECT_EQ(index.blocks(0), confirmed);
        EXPECT_EQ(match(index, h, t0 + milliseconds(3000)), (std::vector<std::size_t>{confirmed}));
      }
    }
  }
}

TEST(PrefixIndexTest, PredictAgainRefreshesTheTtl) {
  PrefixIndex index({milliseconds(1000), milliseconds(1000)});  // ttl from routing
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  const Clock::time_point t0{};
  index.predict(0, h, t0);
  index.predict(0, h, t0 + milliseconds(900));
  // The first prediction's queue entry expires at 1000 ms; the refreshed record must survive it.
  index.expire_predictions(t0 + milliseconds(1500));
  EXPECT_EQ(match(index, h, t0 + milliseconds(1500)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, t0 + milliseconds(1900)), (std::vector<std::size_t>{0}));
}

TEST(PrefixIndexTest, ConfirmationKeepsAPredictedBlockPastTheTtl) {
  PrefixIndex index({milliseconds(1000), milliseconds(1000)});  // ttl from routing
  index.add_replica({});
  const auto h = prompt_hashes(1, 6);
  const Clock::time_point t0{};
  index.predict(0, h, t0);
  store(index, 0, h, 0, 4);  // the engine confirmed the first 4 blocks only
  const Clock::time_point later = t0 + milliseconds(5000);
  index.expire_predictions(later);
  EXPECT_EQ(match(index, h, later), (std::vector<std::size_t>{4}));
  EXPECT_EQ(index.blocks(0), 4U);
  EXPECT_EQ(index.size(), 4U);
}

TEST(PrefixIndexTest, ConfirmedBlocksAreNotPredictedAgain) {
  PrefixIndex index({milliseconds(1000), milliseconds(1000)});  // ttl from routing
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  store(index, 0, h, 0, 4);
  index.predict(0, h, {});
  EXPECT_EQ(index.blocks(0), 4U);  // not 8: a confirmed block carries no prediction
  index.apply_cleared(0);
  EXPECT_EQ(match(index, h, {}), (std::vector<std::size_t>{0}));
}

TEST(PrefixIndexTest, SnapshotReplacesTheConfirmedSet) {
  PrefixIndex index;
  index.add_replica({});
  index.add_replica({});
  const auto a = prompt_hashes(1, 4);
  const auto b = prompt_hashes(2, 4);
  store(index, 0, a, 0, 4);
  store(index, 1, a, 0, 4);
  index.apply_snapshot(0, b);
  EXPECT_EQ(match(index, a), (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(match(index, b), (std::vector<std::size_t>{4, 0}));
  EXPECT_EQ(index.blocks(0), 4U);
  EXPECT_EQ(index.size(), 8U);
}

TEST(PrefixIndexTest, RemovedBreaksTheChainAndClearedForgetsConfirmed) {
  PrefixIndex index;
  index.add_replica({});
  const auto h = prompt_hashes(1, 6);
  store(index, 0, h, 0, 6);
  index.apply_removed(0, h[3]);
  index.apply_removed(0, prompt_hashes(9, 1)[0]);  // not held: a no-op
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{3}));
  EXPECT_EQ(index.size(), 5U);
  index.apply_cleared(0);
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{0}));
  EXPECT_EQ(index.blocks(0), 0U);
  EXPECT_EQ(index.size(), 0U);  // entries nobody holds are erased
}

TEST(PrefixIndexTest, ResetForgetsOneReplicaOnly) {
  PrefixIndex index;
  index.add_replica({});
  index.add_replica({});
  const auto h = prompt_hashes(1, 4);
  store(index, 0, h, 0, 4);
  store(index, 1, h, 0, 2);
  index.predict(0, prompt_hashes(2, 3), {});
  index.reset(0);
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(match(index, prompt_hashes(2, 3)), (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(index.blocks(0), 0U);
  EXPECT_EQ(index.size(), 2U);
}

TEST(PrefixIndexTest, OpenaiPredictionsNeverExpire) {
  PrefixIndex index({milliseconds(10), milliseconds(10)});  // ttl from routing
  index.add_replica({ReplicaKind::kOpenai, 100});
  const auto h = prompt_hashes(1, 4);
  index.predict(0, h, {});
  const Clock::time_point much_later = Clock::time_point{} + std::chrono::hours(24);
  index.expire_predictions(much_later);
  EXPECT_EQ(match(index, h, much_later), (std::vector<std::size_t>{4}));
}

TEST(PrefixIndexTest, OpenaiLruKeepsCapacityAndEvictsTailsFirst) {
  PrefixIndex index;
  index.add_replica({ReplicaKind::kOpenai, 8});
  const auto a = prompt_hashes(1, 6);
  const auto b = prompt_hashes(2, 6);
  index.predict(0, a, {});
  index.predict(0, b, {});
  EXPECT_EQ(index.blocks(0), 8U);
  EXPECT_EQ(index.size(), 8U);
  EXPECT_EQ(match(index, b), (std::vector<std::size_t>{6}));
  EXPECT_EQ(match(index, a), (std::vector<std::size_t>{2}));  // a's tail went, its prefix stayed
  index.predict(0, a, {});  // a is the most recent now: b loses its tail
  EXPECT_EQ(match(index, a), (std::vector<std::size_t>{6}));
  EXPECT_EQ(match(index, b), (std::vector<std::size_t>{2}));
  EXPECT_EQ(index.blocks(0), 8U);
}

TEST(PrefixIndexTest, SupportsMoreThan64Replicas) {
  PrefixIndex index;
  const auto h = prompt_hashes(1, 40);
  // Blocks stored before the index grows past 64 and 128 replicas must survive the widening.
  for (ReplicaId r = 0; r < 150; ++r) {
    index.add_replica({});
    store(index, r, h, 0, r % 37);
  }
  index.predict(149, h, {});  // predictions on a high replica id
  const auto out = match(index, h);
  ASSERT_EQ(out.size(), 150U);
  for (ReplicaId r = 0; r < 149; ++r) EXPECT_EQ(out[r], r % 37) << "replica " << r;
  EXPECT_EQ(out[149], 40U);
  index.reset(149);
  index.reset(100);
  EXPECT_EQ(match(index, h)[100], 0U);
  EXPECT_EQ(match(index, h)[101], 101U % 37);
}

// A block's holders live in its entry up to four, then in a bitmask row; both ways, and with
// predictions and a lower tier on the same block, the match must not change.
TEST(PrefixIndexTest, HoldersMoveBetweenTheEntryAndABitmaskRow) {
  PrefixIndex index;
  constexpr ReplicaId kReplicas = 8;
  for (ReplicaId r = 0; r < kReplicas; ++r) index.add_replica({});
  const auto h = prompt_hashes(1, 2);
  index.predict(7, h, {});
  std::vector<std::size_t> expect(kReplicas, 0);
  expect[7] = 2;
  for (ReplicaId r = 0; r < 6; ++r) {
    index.apply_stored(r, h[0], r % 2 == 0 ? CacheTier::kPrimary : CacheTier::kOffload);
    expect[r] = 1;
    EXPECT_EQ(match(index, h), expect) << r + 1 << " holders";
  }
  std::vector<std::size_t> blocks(kReplicas), offloaded(kReplicas);
  index.longest_match(h, {}, blocks, offloaded);
  EXPECT_EQ(offloaded, (std::vector<std::size_t>{0, 1, 0, 1, 0, 1, 0, 0}));
  for (ReplicaId r = 6; r-- > 0;) {
    index.apply_removed(r, h[0]);
    expect[r] = 0;
    EXPECT_EQ(match(index, h), expect) << r << " holders";
  }
  EXPECT_EQ(index.size(), 2U);  // the predictions keep both entries
  index.reset(7);
  EXPECT_EQ(index.size(), 0U);
  // A row freed by the first block is reused by the next one past four holders.
  for (ReplicaId r = 0; r < 5; ++r) index.apply_stored(r, h[1]);
  EXPECT_EQ(match(index, {h[1]}), (std::vector<std::size_t>{1, 1, 1, 1, 1, 0, 0, 0}));
}

TEST(PrefixIndexTest, EmptyPromptAndNoReplicas) {
  PrefixIndex empty;
  std::vector<std::size_t> none;
  empty.longest_match(prompt_hashes(1, 3), {}, none);  // no replica: nothing to write
  PrefixIndex index;
  index.add_replica({});
  EXPECT_EQ(match(index, {}), (std::vector<std::size_t>{0}));
}

TEST(PrefixIndexTest, OffloadedBlocksMatchAndAreCountedApart) {
  PrefixIndex index;
  for (int i = 0; i < 2; ++i) index.add_replica({ReplicaKind::kVllm, 0});
  const auto h = prompt_hashes(1, 6);
  for (std::size_t i = 0; i < 6; ++i) {
    index.apply_stored(0, h[i], i < 4 ? CacheTier::kPrimary : CacheTier::kOffload);
  }
  for (std::size_t i = 0; i < 3; ++i) index.apply_stored(1, h[i], CacheTier::kOffload);
  std::vector<std::size_t> blocks(2), offloaded(2);
  index.longest_match(h, {}, blocks, offloaded);
  EXPECT_EQ(blocks, (std::vector<std::size_t>{6, 3}));
  EXPECT_EQ(offloaded, (std::vector<std::size_t>{2, 3}));
  // Moving between tiers, and a removal, keep the counts exact.
  index.apply_stored(1, h[0], CacheTier::kPrimary);
  index.apply_removed(0, h[5]);
  index.longest_match(h, {}, blocks, offloaded);
  EXPECT_EQ(blocks, (std::vector<std::size_t>{5, 3}));
  EXPECT_EQ(offloaded, (std::vector<std::size_t>{1, 2}));
  index.apply_cleared(1);
  index.longest_match(h, {}, blocks, offloaded);
  EXPECT_EQ(offloaded, (std::vector<std::size_t>{1, 0}));
}

TEST(PrefixIndexTest, WithoutEventsAVllmReplicaKeepsPredictionsLikeAnOpenaiOne) {
  PrefixIndex index({milliseconds(100), milliseconds(100)});  // ttl from routing
  index.add_replica({ReplicaKind::kVllm, 64});
  const auto h = prompt_hashes(1, 4);
  index.predict(0, h, {});
  const Clock::time_point later = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(match(index, h, later), (std::vector<std::size_t>{4}));  // no TTL while events are down
  // Events connect: the predictions get the TTL from now, and new ones expire too.
  index.set_events_live(0, true, later);
  EXPECT_EQ(match(index, h, later + milliseconds(50)), (std::vector<std::size_t>{4}));
  EXPECT_EQ(match(index, h, later + milliseconds(150)), (std::vector<std::size_t>{0}));
  const auto g = prompt_hashes(2, 3);
  index.predict(0, g, later);
  EXPECT_EQ(match(index, g, later + milliseconds(150)), (std::vector<std::size_t>{0}));
  // And lost again: back to the LRU.
  index.set_events_live(0, false, later);
  index.predict(0, g, later);
  EXPECT_EQ(match(index, g, later + std::chrono::hours(2)), (std::vector<std::size_t>{3}));
}

// Random operation sequences against a plain model: per replica the confirmed hashes with their
// tier and a map of predictions to their expiry. Checks matches, the offloaded counts, blocks()
// and size() (after expiry).
TEST(PrefixIndexTest, RandomOperationsAgreeWithAPlainModel) {
  constexpr std::size_t kReplicas = 70;  // two mask words
  const milliseconds ttl(500);
  PrefixIndex index({ttl, ttl});  // predictions live ttl from routing
  std::vector<std::map<std::uint64_t, CacheTier>> confirmed(kReplicas);
  std::vector<std::map<std::uint64_t, Clock::time_point>> predicted(kReplicas);
  for (std::size_t r = 0; r < kReplicas; ++r) index.add_replica({});

  std::vector<std::vector<std::uint64_t>> prompts;
  for (std::uint64_t p = 0; p < 12; ++p) prompts.push_back(prompt_hashes(p % 4, 6, p, 4));
  std::mt19937_64 rng(7);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  Clock::time_point now{};

  for (int op = 0; op < 4000; ++op) {
    const auto r = static_cast<ReplicaId>(pick(kReplicas));
    const auto& prompt = prompts[pick(prompts.size())];
    const std::uint64_t hash = prompt[pick(prompt.size())];
    switch (pick(8)) {
      case 0:
      case 1: {
        const CacheTier tier = pick(3) == 0 ? CacheTier::kOffload : CacheTier::kPrimary;
        index.apply_stored(r, hash, tier);
        confirmed[r][hash] = tier;
        predicted[r].erase(hash);
        break;
      }
      case 2:
        index.apply_removed(r, hash);
        confirmed[r].erase(hash);
        break;
      case 3:
        if (pick(10) == 0) {
          index.apply_cleared(r);
          confirmed[r].clear();
        } else if (pick(10) == 0) {
          index.reset(r);
          confirmed[r].clear();
          predicted[r].clear();
        }
        break;
      case 4: {
        std::vector<std::uint64_t> snapshot(prompt.begin(), prompt.begin() + 3);
        index.apply_snapshot(r, snapshot);
        confirmed[r].clear();
        for (std::uint64_t h : snapshot) confirmed[r][h] = CacheTier::kPrimary;
        for (std::uint64_t h : snapshot) predicted[r].erase(h);
        break;
      }
      default:
        index.predict(r, prompt, now);
        for (std::uint64_t h : prompt) {
          if (!confirmed[r].contains(h)) predicted[r][h] = now + ttl;
        }
        break;
    }
    now += milliseconds(pick(40));

    const auto& q = prompts[pick(prompts.size())];
    std::vector<std::size_t> out(kReplicas), offloaded(kReplicas);
    index.longest_match(q, now, out, offloaded);
    for (std::size_t i = 0; i < kReplicas; ++i) {
      std::size_t expect = 0, expect_offloaded = 0;
      while (expect < q.size() &&
             (confirmed[i].contains(q[expect]) ||
              (predicted[i].contains(q[expect]) && predicted[i][q[expect]] > now))) {
        auto c = confirmed[i].find(q[expect]);
        if (c != confirmed[i].end() && c->second == CacheTier::kOffload) ++expect_offloaded;
        ++expect;
      }
      ASSERT_EQ(out[i], expect) << "op " << op << " replica " << i;
      ASSERT_EQ(offloaded[i], expect_offloaded) << "op " << op << " replica " << i;
    }
    if (op % 50 == 0) {
      index.expire_predictions(now);
      std::set<std::uint64_t> all;
      for (std::size_t i = 0; i < kReplicas; ++i) {
        std::erase_if(predicted[i], [&](const auto& kv) { return kv.second <= now; });
        for (const auto& [h, tier] : confirmed[i]) all.insert(h);
        for (const auto& [h, expiry] : predicted[i]) all.insert(h);
        ASSERT_EQ(index.blocks(static_cast<ReplicaId>(i)),
                  confirmed[i].size() + predicted[i].size());
      }
      ASSERT_EQ(index.size(), all.size()) << "op " << op;
    }
  }
}

// A prefix cache holds a block only with its parent, so what a replica holds of a prompt
// (confirmed, or predicted and not expired) is a leading run; longest_match gallops over long
// prompts on that property, and must then equal the block-by-block walk. Random chains sharing
// prefixes, random confirmed and predicted runs per replica, predictions of a prefix renewed
// later than its tail (so their expiries keep the runs prefix-closed), queried at random times;
// fewer and more than 64 replicas, few and many distinct match lengths.
TEST(PrefixIndexTest, GallopingMatchEqualsTheLinearWalkWhenHoldersArePrefixClosed) {
  std::mt19937_64 rng(17);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const milliseconds ttl(1000);
  for (int round = 0; round < 80; ++round) {
    const std::size_t replicas = round % 2 == 0 ? 1 + pick(63) : 65 + pick(200);
    PrefixIndex index({ttl, ttl});  // predictions live ttl from routing
    for (std::size_t r = 0; r < replicas; ++r) index.add_replica({});
    // Prompts of 16 to 650 blocks (galloped from 16) sharing their first `shared` blocks; a
    // third of the rounds keep them short.
    const std::size_t shared = pick(round % 3 == 0 ? 32 : 300);
    std::vector<std::vector<std::uint64_t>> prompts;
    for (std::uint64_t p = 0; p < 4; ++p) {
      prompts.push_back(prompt_hashes(round, shared, p, 16 + pick(round % 3 == 0 ? 48 : 348)));
    }
    // The plain model: confirmed blocks, and each predicted block's latest expiry.
    std::vector<std::set<std::uint64_t>> confirmed(replicas);
    std::vector<std::map<std::uint64_t, Clock::time_point>> predicted(replicas);
    // Replicas holding something: one, a few or all (one distinct match length or hundreds).
    const std::size_t holding = std::min(replicas, std::size_t{1} << pick(9));
    for (std::size_t k = 0; k < holding; ++k) {
      const auto r = static_cast<ReplicaId>(pick(replicas));
      const auto& chain = prompts[pick(prompts.size())];
      const std::size_t stored = pick(3) == 0 ? chain.size() : pick(chain.size() + 1);
      for (std::size_t i = 0; i < stored; ++i) {
        index.apply_stored(r, chain[i]);
        confirmed[r].insert(chain[i]);
        predicted[r].erase(chain[i]);
      }
      // Predictions: a long run, then a shorter one later (it outlives the long one's tail).
      Clock::time_point at{};
      for (std::size_t len = chain.size() - pick(chain.size() / 2 + 1); len > 0 && pick(3) != 0;
           len = pick(len)) {
        at += milliseconds(pick(400));
        const std::vector<std::uint64_t> run(chain.begin(), chain.begin() + len);
        index.predict(r, run, at);  // which also drops r's predictions expired by `at`
        std::erase_if(predicted[r], [&](const auto& kv) { return kv.second <= at; });
        for (std::uint64_t h : run) {
          if (confirmed[r].contains(h)) continue;
          Clock::time_point& expiry = predicted[r][h];
          expiry = std::max(expiry, at + ttl);
        }
      }
    }
    for (int query = 0; query < 6; ++query) {
      const auto& q = prompts[pick(prompts.size())];
      const Clock::time_point now = Clock::time_point{} + milliseconds(pick(2500));
      const auto out = match(index, q, now);
      for (std::size_t r = 0; r < replicas; ++r) {
        std::size_t expect = 0;
        while (expect < q.size()) {
          auto p = predicted[r].find(q[expect]);
          if (!confirmed[r].contains(q[expect]) && (p == predicted[r].end() || p->second <= now)) {
            break;
          }
          ++expect;
        }
        ASSERT_EQ(out[r], expect) << "round " << round << " query " << query << " replica " << r
                                  << " of " << replicas;
      }
    }
  }
}

// Where a replica's blocks are not a leading run (a hole in the middle, which a prefix cache
// does not leave), a long prompt's match may skip the hole: it ends at a block the replica lacks
// right after one it holds, never before the first hole. A hole at the first block is always
// seen, and short prompts and the count of lower-tier blocks walk block by block.
TEST(PrefixIndexTest, AHoleInTheMiddleOfALongMatchMayBeSkipped) {
  PrefixIndex index;
  for (int i = 0; i < 2; ++i) index.add_replica({});
  const auto h = prompt_hashes(1, 200);
  store(index, 0, h, 0, 200);
  index.apply_removed(0, h[100]);
  store(index, 1, h, 1, 200);  // no block 0
  // The probes (0, then 1, 2, 4, ..., 128 and 199) all miss the hole.
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{200, 0}));
  store(index, 0, h, 100, 101);
  index.apply_removed(0, h[10]);
  // From 16 blocks on a prompt is galloped too: probes 0, 1, 3, 7, 15 and 47 miss block 10.
  const std::vector<std::uint64_t> prompt48(h.begin(), h.begin() + 48);
  EXPECT_EQ(match(index, prompt48), (std::vector<std::size_t>{48, 0}));
  // Under 16 blocks it is walked block by block, which finds the hole.
  const std::vector<std::uint64_t> short_prompt(h.begin(), h.begin() + 15);
  EXPECT_EQ(match(index, short_prompt), (std::vector<std::size_t>{10, 0}));
  // So is any prompt whose lower-tier blocks are counted.
  index.apply_stored(1, h[5], CacheTier::kOffload);
  std::vector<std::size_t> blocks(2), offloaded(2);
  index.longest_match(h, {}, blocks, offloaded);
  EXPECT_EQ(blocks, (std::vector<std::size_t>{10, 0}));
  EXPECT_EQ(match(index, h), (std::vector<std::size_t>{200, 0}));  // the gallop skips it
}

}  // namespace
}  // namespace prefixgate::gateway

namespace prefixgate::gateway {
namespace {

// A policy that keeps its own index grows it as it first hears of a replica (sglang_cache_aware
// hears of a peer gateway's send before it routes): replicas added after another replica's LRU
// predictions must move that LRU, not copy it, or its positions point into a freed list.
TEST(PrefixIndexTest, ReplicasAddedAfterLruPredictionsKeepTheLruWorking) {
  PrefixIndex index;
  index.add_replica({ReplicaKind::kOpenai, 8});
  const std::vector<std::uint64_t> first{1, 2, 3, 4, 5, 6};
  index.predict(0, first, {});
  for (int i = 0; i < 100; ++i) index.add_replica({ReplicaKind::kOpenai, 8});
  index.predict(0, first, {});  // touches the moved list's entries
  index.predict(0, std::vector<std::uint64_t>{7, 8, 9, 10}, {});  // evicts two of them
  std::vector<std::size_t> match(index.replica_count());
  index.longest_match(first, {}, match);
  EXPECT_EQ(match[0], 4U) << "the LRU took the first prompt's tail, its last two blocks";
  EXPECT_EQ(index.blocks(0), 8U);
  EXPECT_EQ(index.evicted_blocks(0), 2U);
}

// apply_changes is apply_stored / apply_removed in order, whatever the run: a block stored and
// removed within one chunk of its lookahead, or across two, stored twice, moved between tiers,
// removed without being held. Checked on a small index and on one past the size from which it
// looks its chunks up ahead (1 M blocks), against the same changes applied one call at a time.
TEST(PrefixIndexTest, AppliedRunsEqualTheirChangesAppliedOneByOne) {
  for (const std::size_t base_blocks : {std::size_t{0}, std::size_t{1} << 20}) {
    PrefixIndex runs, single;
    for (int r = 0; r < 3; ++r) {
      runs.add_replica({});
      single.add_replica({});
    }
    // Filler: replica 2 holds base_blocks blocks no change touches.
    std::vector<KeyChange> filler;
    for (std::size_t i = 0; i < base_blocks; ++i) {
      filler.push_back({testing::mix(0xf111e5 + i), KeyState::kPrimary});
    }
    runs.apply_changes(2, filler);
    for (const KeyChange& c : filler) single.apply_stored(2, c.key);

    std::mt19937_64 rng(base_blocks + 11);
    const std::vector<std::uint64_t> pool = prompt_hashes(5, 40);
    for (int round = 0; round < 200; ++round) {
      const auto r = static_cast<ReplicaId>(rng() % 2);
      std::vector<KeyChange> run(rng() % 40);
      for (KeyChange& c : run) {
        c.key = pool[rng() % pool.size()];
        c.state = static_cast<KeyState>(rng() % 3);
      }
      runs.apply_changes(r, run);
      for (const KeyChange& c : run) {
        switch (c.state) {
          case KeyState::kAbsent: single.apply_removed(r, c.key); break;
          case KeyState::kOffload: single.apply_stored(r, c.key, CacheTier::kOffload); break;
          case KeyState::kPrimary: single.apply_stored(r, c.key, CacheTier::kPrimary); break;
        }
      }
      ASSERT_EQ(runs.size(), single.size()) << "round " << round;
      for (ReplicaId k = 0; k < 3; ++k) {
        ASSERT_EQ(runs.blocks(k), single.blocks(k)) << "round " << round << " replica " << k;
        ASSERT_EQ(runs.evicted_blocks(k), single.evicted_blocks(k)) << "round " << round;
      }
      // Every prefix of the pool, with the blocks held on a lower tier counted.
      for (std::size_t len = 1; len <= pool.size(); len += 7) {
        const std::vector<std::uint64_t> prefix(pool.begin(), pool.begin() + len);
        std::vector<std::size_t> a(3), b(3), a_lower(3), b_lower(3);
        runs.longest_match(prefix, {}, a, a_lower);
        single.longest_match(prefix, {}, b, b_lower);
        ASSERT_EQ(a, b) << "round " << round << " length " << len;
        ASSERT_EQ(a_lower, b_lower) << "round " << round << " length " << len;
      }
    }
  }
}

}  // namespace
}  // namespace prefixgate::gateway
