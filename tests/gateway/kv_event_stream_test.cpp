// KvEventStream: sequence numbers as a vLLM publisher sends them, with gaps, replays, restarts
// and undecodable batches; and ReplicaKeys, the union of a replica's data-parallel ranks.
#include "prefixgate/gateway/kv_event_stream.h"

#include <gtest/gtest.h>

#include <map>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/gateway/replica_keys.h"
#include "prefixgate/kv_events/wire.h"

namespace prefixgate::gateway {
namespace {

using kv_events::EngineHash;

constexpr const char* kStreamModel = "m";

// Batch i stores engine block i of one chain (16 tokens each).
std::vector<std::uint32_t> chain_tokens() {
  std::vector<std::uint32_t> t(16 * 64);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::uint32_t>(i * 3 + 1);
  return t;
}

std::string store_batch(std::size_t i) {
  static const auto tokens = chain_tokens();
  kv_events::BlockStored s;
  s.block_hashes = {1000 + i};
  if (i > 0) s.parent = 1000 + i - 1;
  s.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(16 * i),
                     tokens.begin() + static_cast<std::ptrdiff_t>(16 * (i + 1)));
  s.block_size = 16;
  kv_events::EventBatch b;
  b.events.emplace_back(std::move(s));
  return kv_events::encode_event_batch(b);
}

std::uint64_t key(std::size_t i) {
  static const auto keys =
      canon::block_hashes(chain_tokens(), 16, canon::block_hash_root(kStreamModel));
  return keys[i];
}

struct Fixture {
  KvEventStream stream;
  std::vector<KeyChange> out;
  std::map<std::uint64_t, KeyState> state;
  explicit Fixture(bool replay)
      : stream(BlockKeysConfig{.model_id = kStreamModel, .block_size = 16},
               KvStreamOptions{.replay = replay}) {}
  void fold() {
    for (const KeyChange& c : out) state[c.key] = c.state;
    out.clear();
  }
  bool held(std::size_t i) {
    fold();
    return state.contains(key(i)) && state[key(i)] == KeyState::kPrimary;
  }
  std::optional<std::int64_t> live(std::int64_t seq, std::size_t block) {
    return stream.live(seq, store_batch(block), out);
  }
};

TEST(KvEventStreamTest, InOrderBatchesAreApplied) {
  Fixture f(false);
  EXPECT_FALSE(f.stream.start().has_value());  // no replay socket
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FALSE(f.live(static_cast<std::int64_t>(i), i));
  EXPECT_TRUE(f.held(0) && f.held(1) && f.held(2));
  EXPECT_EQ(f.stream.stats().batches, 3U);
  EXPECT_EQ(f.stream.stats().stored_events, 3U);
  EXPECT_EQ(f.stream.next(), 3);
}

TEST(KvEventStreamTest, AGapIsReplayedFromTheFirstMissingSequence) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);  // start-up: the engine's buffer from its oldest batch
  f.stream.replayed(0, store_batch(0), f.out);
  f.stream.replay_done(f.out);
  EXPECT_FALSE(f.live(1, 1));
  const auto from = f.live(4, 4);  // 2 and 3 were dropped
  ASSERT_EQ(from, 2);
  EXPECT_TRUE(f.stream.replaying());
  f.stream.replayed(2, store_batch(2), f.out);
  f.stream.replayed(3, store_batch(3), f.out);
  f.stream.replayed(4, store_batch(4), f.out);
  f.stream.replay_done(f.out);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_TRUE(f.held(i)) << i;
  EXPECT_EQ(f.stream.stats().gaps_replayed, 1U);
  EXPECT_EQ(f.stream.stats().gaps_lost, 0U);
  EXPECT_EQ(f.stream.stats().replays, 2U);
  EXPECT_FALSE(f.live(5, 5));
  EXPECT_TRUE(f.held(5));
}

TEST(KvEventStreamTest, WhatTheReplayNoLongerHasIsLostAndItsKeysUnknown) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);
  f.stream.replay_done(f.out);  // the start-up replay brought nothing: the engine is new
  EXPECT_FALSE(f.live(0, 0));
  EXPECT_FALSE(f.live(1, 1));
  ASSERT_EQ(f.live(5, 5), 2);
  f.stream.replayed(4, store_batch(4), f.out);  // the buffer starts at 4: 2 and 3 are gone
  f.stream.replay_done(f.out);
  EXPECT_EQ(f.stream.stats().gaps_lost, 1U);
  EXPECT_FALSE(f.held(0));  // unknown until stored again
  EXPECT_FALSE(f.held(1));
  EXPECT_FALSE(f.held(4));  // its parent (3) was never seen: cannot be placed
  EXPECT_EQ(f.stream.next(), 6);
}

TEST(KvEventStreamTest, WithoutAReplaySocketAGapIsLostAtOnce) {
  Fixture f(false);
  f.live(0, 0);
  f.live(1, 1);
  EXPECT_FALSE(f.live(3, 3).has_value());
  EXPECT_EQ(f.stream.stats().gaps_lost, 1U);
  EXPECT_FALSE(f.held(0));
  EXPECT_FALSE(f.held(1));
  EXPECT_EQ(f.stream.next(), 4);
}

TEST(KvEventStreamTest, SequenceNumbersStartingOverMeanARestart) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);
  f.stream.replay_done(f.out);
  for (std::int64_t i = 0; i < 4; ++i) f.live(i, static_cast<std::size_t>(i));
  EXPECT_TRUE(f.held(3));
  // The engine restarted; its first batch after that reached us as sequence 1.
  const auto from = f.live(1, 0);
  ASSERT_EQ(from, 0);
  EXPECT_EQ(f.stream.stats().resets, 1U);
  EXPECT_FALSE(f.held(3));  // forgotten
  f.stream.replayed(0, store_batch(0), f.out);
  f.stream.replayed(1, store_batch(1), f.out);
  f.stream.replay_done(f.out);
  EXPECT_TRUE(f.held(0));
  EXPECT_TRUE(f.held(1));
  EXPECT_EQ(f.stream.next(), 2);
}

TEST(KvEventStreamTest, BatchesAlreadyReplayedAreSkippedWhenTheyArriveLive) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);
  for (std::int64_t i = 0; i < 4; ++i) {
    f.stream.replayed(i, store_batch(static_cast<std::size_t>(i)), f.out);
  }
  f.stream.replay_done(f.out);
  // The SUB socket queued 2 and 3 while the replay ran: duplicates, not a restart.
  EXPECT_FALSE(f.live(2, 2).has_value());
  EXPECT_FALSE(f.live(3, 3).has_value());
  EXPECT_EQ(f.stream.stats().resets, 0U);
  EXPECT_EQ(f.stream.stats().batches, 4U);
  EXPECT_FALSE(f.live(4, 4).has_value());
  EXPECT_EQ(f.stream.stats().batches, 5U);
}

TEST(KvEventStreamTest, ABatchBeforeStartAsksForTheHistoryFirst) {
  Fixture f(true);
  ASSERT_EQ(f.live(5, 5), 0);  // the engine's buffer first
  EXPECT_FALSE(f.stream.start().has_value());
  for (std::int64_t i = 3; i < 6; ++i) {
    f.stream.replayed(i, store_batch(static_cast<std::size_t>(i - 3)), f.out);
  }
  f.stream.replay_done(f.out);
  EXPECT_TRUE(f.held(0) && f.held(1) && f.held(2));
  EXPECT_EQ(f.stream.next(), 6);
  EXPECT_EQ(f.stream.stats().gaps_lost, 0U);
}

TEST(KvEventStreamTest, AStartUpReplayBeginsAtTheOldestBufferedBatch) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);
  f.stream.replayed(7, store_batch(0), f.out);  // the engine's buffer starts at 7
  f.stream.replayed(8, store_batch(1), f.out);
  f.stream.replay_done(f.out);
  EXPECT_TRUE(f.held(0) && f.held(1));
  EXPECT_EQ(f.stream.stats().gaps_lost, 0U);
  EXPECT_EQ(f.stream.next(), 9);
}

TEST(KvEventStreamTest, AnUndecodableBatchCountsAndLosesWhatWasKnown) {
  Fixture f(false);
  f.live(0, 0);
  EXPECT_FALSE(f.stream.live(1, "\xc1 not msgpack", f.out).has_value());
  EXPECT_EQ(f.stream.stats().malformed_payloads, 1U);
  EXPECT_FALSE(f.held(0));
  EXPECT_FALSE(f.live(2, 2).has_value());  // the sequence moved on: no gap
  EXPECT_EQ(f.stream.stats().gaps_lost, 0U);
}

TEST(KvEventStreamTest, AReconnectionCatchesUpFromTheNextSequence) {
  Fixture f(true);
  ASSERT_EQ(f.stream.start(), 0);
  f.stream.replay_done(f.out);
  f.live(0, 0);
  ASSERT_EQ(f.stream.reconnected(), 1);
  f.stream.replayed(1, store_batch(1), f.out);
  f.stream.replay_done(f.out);
  EXPECT_TRUE(f.held(1));
  EXPECT_EQ(f.stream.stats().gaps_replayed, 1U);
  ASSERT_EQ(f.stream.reconnected(), 2);  // nothing missed this time: no gap counted
  f.stream.replay_done(f.out);
  EXPECT_EQ(f.stream.stats().gaps_replayed, 1U);
}

TEST(ReplicaKeysTest, AKeyIsHeldWhileAnyRankHoldsItOnItsBestTier) {
  ReplicaKeys keys(2);
  std::vector<KeyChange> out;
  const std::vector<KeyChange> r0{{1, KeyState::kPrimary}, {2, KeyState::kOffload}};
  keys.apply(0, r0, out);
  ASSERT_EQ(out.size(), 2U);
  out.clear();
  keys.apply(1, std::vector<KeyChange>{{1, KeyState::kOffload}, {2, KeyState::kPrimary}}, out);
  ASSERT_EQ(out.size(), 1U);  // key 2 moves up to the device tier; key 1 already was
  EXPECT_EQ(out[0].key, 2U);
  EXPECT_EQ(out[0].state, KeyState::kPrimary);
  out.clear();
  keys.apply(0, std::vector<KeyChange>{{1, KeyState::kAbsent}}, out);
  ASSERT_EQ(out.size(), 1U);  // rank 1 still holds it, on the lower tier
  EXPECT_EQ(out[0].state, KeyState::kOffload);
  out.clear();
  keys.apply(1, std::vector<KeyChange>{{1, KeyState::kAbsent}}, out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].state, KeyState::kAbsent);
  EXPECT_EQ(keys.size(), 1U);
  EXPECT_EQ(keys.held().size(), 1U);
}

}  // namespace
}  // namespace prefixgate::gateway
