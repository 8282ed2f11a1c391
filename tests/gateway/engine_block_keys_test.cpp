// EngineBlockKeys: our keys recomputed from an engine's BlockStored token ids equal the keys the
// gateway computes for a prompt (canon::block_hashes), whatever the engine's block size; removals
// and other media find them by the engine's hash; the map stays bounded.
#include "prefixgate/gateway/engine_block_keys.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "prefixgate/canonicalize/block_hash.h"

namespace prefixgate::gateway {
namespace {

using kv_events::BlockRemoved;
using kv_events::BlockStored;
using kv_events::EngineHash;
using kv_events::Medium;

constexpr const char* kModel = "test-model";

std::vector<std::uint32_t> tokens_of(std::size_t n, std::uint32_t seed = 1) {
  std::vector<std::uint32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = seed * 1000 + static_cast<std::uint32_t>(i);
  return t;
}

std::vector<std::uint64_t> our_keys(const std::vector<std::uint32_t>& tokens, std::size_t g,
                                    std::string_view salt = {}) {
  return canon::block_hashes(tokens, g, canon::block_hash_root(kModel, salt));
}

// The engine's block i of a chain: any hash unlike ours (an engine uses its own function).
EngineHash engine_hash(std::size_t chain, std::size_t i) {
  return 0xE000000000000000ULL + chain * 100000 + i;
}

// BlockStored for engine blocks [first, last) of `tokens` cut in blocks of `e`.
BlockStored stored(const std::vector<std::uint32_t>& tokens, std::size_t e, std::size_t first,
                   std::size_t last, Medium medium = Medium::kGpu, std::size_t chain = 0,
                   std::string salt = {}) {
  BlockStored s;
  for (std::size_t i = first; i < last; ++i) s.block_hashes.push_back(engine_hash(chain, i));
  if (first > 0) s.parent = engine_hash(chain, first - 1);
  s.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(first * e),
                     tokens.begin() + static_cast<std::ptrdiff_t>(last * e));
  s.block_size = e;
  s.medium = medium;
  s.cache_salt = std::move(salt);
  return s;
}

BlockRemoved removed(std::vector<std::size_t> blocks, Medium medium = Medium::kGpu,
                     std::size_t chain = 0) {
  BlockRemoved r;
  for (std::size_t i : blocks) r.block_hashes.push_back(engine_hash(chain, i));
  r.medium = medium;
  return r;
}

// The state of every key ever reported, folding changes in order.
struct Seen {
  std::map<std::uint64_t, KeyState> state;
  void fold(std::vector<KeyChange>& changes) {
    for (const KeyChange& c : changes) state[c.key] = c.state;
    changes.clear();
  }
  KeyState of(std::uint64_t key) const {
    auto it = state.find(key);
    return it == state.end() ? KeyState::kAbsent : it->second;
  }
};

TEST(EngineBlockKeysTest, KeysEqualThePromptsOwnBlockHashesAcrossEvents) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(16 * 5);
  const auto want = our_keys(tokens, 16, "tenant-a");
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 2, Medium::kGpu, 0, "tenant-a"), out);
  keys.stored(stored(tokens, 16, 2, 5), out);  // continues the known chain: no salt needed
  seen.fold(out);
  ASSERT_EQ(seen.state.size(), 5U);
  for (std::uint64_t k : want) EXPECT_EQ(seen.of(k), KeyState::kPrimary);
  EXPECT_EQ(keys.held_keys(), 5U);

  keys.removed(removed({3, 4}), out);  // by the engine's hash, no tokens
  seen.fold(out);
  EXPECT_EQ(seen.of(want[2]), KeyState::kPrimary);
  EXPECT_EQ(seen.of(want[3]), KeyState::kAbsent);
  EXPECT_EQ(seen.of(want[4]), KeyState::kAbsent);
}

TEST(EngineBlockKeysTest, AChainWhoseParentWasNeverSeenIsSkipped) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(64);
  std::vector<KeyChange> out;
  keys.stored(stored(tokens, 16, 2, 4), out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(keys.skips().unknown_parent, 2U);
}

TEST(EngineBlockKeysTest, EngineBlocksHalfOursMakeAKeyOfTwoParts) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 32});
  const auto tokens = tokens_of(16 * 5);  // 5 engine blocks: our 2 keys and 16 tokens over
  const auto want = our_keys(tokens, 32);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 1), out);  // half a key: nothing yet
  EXPECT_TRUE(out.empty());
  keys.stored(stored(tokens, 16, 1, 5), out);
  seen.fold(out);
  ASSERT_EQ(seen.state.size(), 2U);
  EXPECT_EQ(seen.of(want[0]), KeyState::kPrimary);
  EXPECT_EQ(seen.of(want[1]), KeyState::kPrimary);

  keys.removed(removed({0}), out);  // the first half of our first key
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kAbsent);
  EXPECT_EQ(seen.of(want[1]), KeyState::kPrimary);
  // Stored again, by hash alone (as after an eviction and a recompute): held again.
  BlockStored again;
  again.block_hashes = {engine_hash(0, 0)};
  keys.stored(again, out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kPrimary);
}

TEST(EngineBlockKeysTest, EngineBlocksTwiceOursHoldTwoKeysEach) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(32 * 3);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 32, 0, 3), out);
  seen.fold(out);
  ASSERT_EQ(seen.state.size(), 6U);
  keys.removed(removed({1}), out);
  seen.fold(out);
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(seen.of(want[k]), k == 2 || k == 3 ? KeyState::kAbsent : KeyState::kPrimary) << k;
  }
}

TEST(EngineBlockKeysTest, SglangOneTokenPagesBuildOurBlocks) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(40);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  for (std::size_t i = 0; i < 40; ++i) keys.stored(stored(tokens, 1, i, i + 1), out);
  seen.fold(out);
  ASSERT_EQ(seen.state.size(), 2U);
  EXPECT_EQ(seen.of(want[0]), KeyState::kPrimary);
  EXPECT_EQ(seen.of(want[1]), KeyState::kPrimary);
  keys.removed(removed({20}), out);  // a token of our second block
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kPrimary);
  EXPECT_EQ(seen.of(want[1]), KeyState::kAbsent);
}

TEST(EngineBlockKeysTest, OffloadedBlocksAreHeldOnTheLowerTier) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(32);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 2), out);
  // vLLM's CPU offloading reports the same hashes on medium CPU, with no tokens.
  BlockStored cpu;
  cpu.block_hashes = {engine_hash(0, 0), engine_hash(0, 1)};
  cpu.medium = Medium::kOffload;
  keys.stored(cpu, out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kPrimary);
  keys.removed(removed({0, 1}, Medium::kGpu), out);  // evicted from the GPU, still on the CPU
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kOffload);
  EXPECT_EQ(seen.of(want[1]), KeyState::kOffload);
  keys.removed(removed({1}, Medium::kOffload), out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kOffload);
  EXPECT_EQ(seen.of(want[1]), KeyState::kAbsent);
}

TEST(EngineBlockKeysTest, ClearedKeepsWhatHashesMeanResetForgetsIt) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(48);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 2), out);
  keys.cleared(out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kAbsent);
  EXPECT_EQ(keys.held_keys(), 0U);
  keys.stored(stored(tokens, 16, 2, 3), out);  // its parent is still known
  seen.fold(out);
  EXPECT_EQ(seen.of(want[2]), KeyState::kPrimary);
  keys.reset(out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[2]), KeyState::kAbsent);
  EXPECT_EQ(keys.tracked_blocks(), 0U);
  keys.stored(stored(tokens, 16, 2, 3), out);  // after a restart its parent means nothing
  EXPECT_TRUE(out.empty());
}

TEST(EngineBlockKeysTest, TheMapIsBoundedAndForgetsTheOldestFirst) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16, .max_blocks = 4});
  const auto tokens = tokens_of(16 * 6);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 6), out);
  seen.fold(out);
  EXPECT_EQ(keys.tracked_blocks(), 4U);
  // The two oldest are forgotten, so their keys cannot be taken back by a removal: absent.
  EXPECT_EQ(seen.of(want[0]), KeyState::kAbsent);
  EXPECT_EQ(seen.of(want[1]), KeyState::kAbsent);
  for (std::size_t k = 2; k < 6; ++k) EXPECT_EQ(seen.of(want[k]), KeyState::kPrimary);
  keys.removed(removed({0}), out);  // forgotten: nothing to do
  EXPECT_TRUE(out.empty());
}

TEST(EngineBlockKeysTest, ABlockHeldNowhereIsForgottenBeforeOlderHeldOnes) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16, .max_blocks = 4});
  const auto tokens = tokens_of(16 * 5);
  const auto want = our_keys(tokens, 16);
  std::vector<KeyChange> out;
  Seen seen;
  keys.stored(stored(tokens, 16, 0, 4), out);
  keys.removed(removed({3}), out);  // the newest block, evicted: the first to forget
  seen.fold(out);
  EXPECT_EQ(seen.of(want[3]), KeyState::kAbsent);
  // Its chain still continues from it, and the map, one over, forgets it, not block 0.
  keys.stored(stored(tokens, 16, 4, 5), out);
  seen.fold(out);
  EXPECT_EQ(keys.tracked_blocks(), 4U);
  EXPECT_EQ(seen.of(want[4]), KeyState::kPrimary);
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(seen.of(want[k]), KeyState::kPrimary) << k;
  // Block 0 is still known: its removal is heard.
  keys.removed(removed({0}), out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[0]), KeyState::kAbsent);
  // Stored again, block 3 is placed again from block 2's chain.
  keys.stored(stored(tokens, 16, 3, 4), out);
  seen.fold(out);
  EXPECT_EQ(seen.of(want[3]), KeyState::kPrimary);
}

TEST(EngineBlockKeysTest, LoraAndOtherGroupsAreSkipped) {
  EngineBlockKeys keys({.model_id = kModel, .block_size = 16});
  const auto tokens = tokens_of(32);
  std::vector<KeyChange> out;
  BlockStored lora = stored(tokens, 16, 0, 2);
  lora.lora = true;
  keys.stored(lora, out);
  BlockStored window = stored(tokens, 16, 0, 2);
  window.group = 1;
  keys.stored(window, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(keys.skips().lora, 2U);
  EXPECT_EQ(keys.skips().other_group, 2U);
}

// Random stores and removals of one chain's engine blocks, at engine block sizes around ours,
// against a plain model: our key k covers tokens [16k, 16k+16) and is held where every engine
// block holding one of its tokens is.
TEST(EngineBlockKeysTest, RandomEventsAgreeWithAPlainModelForAnyEngineBlockSize) {
  constexpr std::size_t g = 16;
  std::mt19937_64 rng(11);
  for (std::size_t e : {1, 4, 8, 16, 24, 32, 48, 64}) {
    const std::size_t engine_blocks = 192 / e;
    const auto tokens = tokens_of(engine_blocks * e, static_cast<std::uint32_t>(e));
    const auto want = our_keys(tokens, g);
    EngineBlockKeys keys({.model_id = kModel, .block_size = g});
    std::vector<std::uint8_t> media(engine_blocks, 0);  // bit 1 GPU, bit 2 lower tier
    std::size_t frontier = 0;                           // engine blocks ever stored
    std::vector<KeyChange> out;
    Seen seen;
    for (int op = 0; op < 400; ++op) {
      const Medium m = rng() % 3 == 0 ? Medium::kOffload : Medium::kGpu;
      const std::uint8_t bit = m == Medium::kGpu ? 1 : 2;
      if (rng() % 2 == 0) {
        // A segment continuing a known chain (or starting at the root).
        const std::size_t first = rng() % (frontier + 1);
        const std::size_t last = std::min(engine_blocks, first + 1 + rng() % 4);
        keys.stored(stored(tokens, e, first, last, m), out);
        for (std::size_t i = first; i < last; ++i) media[i] |= bit;
        frontier = std::max(frontier, last);
      } else if (frontier > 0) {
        const std::size_t i = rng() % frontier;
        keys.removed(removed({i}, m), out);
        media[i] &= static_cast<std::uint8_t>(~bit);
      }
      seen.fold(out);
      for (std::size_t k = 0; k < want.size(); ++k) {
        const std::size_t first_block = k * g / e, last_block = ((k + 1) * g - 1) / e;
        KeyState expect = KeyState::kAbsent;
        if (last_block < frontier) {
          bool gpu = true, held = true;
          for (std::size_t b = first_block; b <= last_block; ++b) {
            gpu = gpu && (media[b] & 1) != 0;
            held = held && media[b] != 0;
          }
          expect = gpu ? KeyState::kPrimary : held ? KeyState::kOffload : KeyState::kAbsent;
        }
        ASSERT_EQ(seen.of(want[k]), expect)
            << "engine block size " << e << ", op " << op << ", key " << k;
      }
    }
  }
}

}  // namespace
}  // namespace prefixgate::gateway
