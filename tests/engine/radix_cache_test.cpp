#include "prefixgate/engine/radix_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "prefixgate/canonicalize/block_hash.h"
#include "radix_cache_node.h"  // test seam: node fields (engine/src is on the include path)

namespace prefixgate::engine {
namespace {

using ::testing::HasSubstr;
using Kind = CacheEvent::Kind;

constexpr std::size_t kPageTokens = 4;  // page tokens in the unit tests: short prompts, many blocks
constexpr char kTestModel[] = "test-model";

// A prompt made of whole blocks, block b being the tokens {10b, 10b+1, 10b+2, 10b+3}: equal
// block ids mean equal blocks, which makes tree shapes easy to spell.
std::vector<TokenId> prompt(std::initializer_list<TokenId> blocks) {
  std::vector<TokenId> out;
  for (TokenId b : blocks) {
    for (TokenId j = 0; j < kPageTokens; ++j) out.push_back(10 * b + j);
  }
  return out;
}

// The chained hash of the last full block of `tokens` under `salt`.
std::uint64_t block_hash(std::string_view salt, const std::vector<TokenId>& tokens) {
  return canon::block_hashes(tokens, kPageTokens, canon::block_hash_root(kTestModel, salt)).back();
}

class RadixCacheTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(cache_.check_invariants(), ""); }

  std::vector<PageId> allocate(std::size_t n) {
    std::vector<PageId> pages;
    EXPECT_TRUE(pool_.allocate(n, pages));
    return pages;
  }

  // Caches `tokens` on fresh pages and drops the caller's references, as a finished sequence
  // does: the cache then holds the pages alone.
  std::vector<PageId> cache_alone(std::string_view salt, const std::vector<TokenId>& tokens) {
    std::vector<PageId> pages = allocate(tokens.size() / kPageTokens);
    cache_.insert(salt, tokens, pages);
    for (PageId p : pages) pool_.release(p);
    return pages;
  }

  std::size_t matched(std::string_view salt, const std::vector<TokenId>& tokens) {
    return cache_.match_prefix(salt, tokens).tokens;
  }

  PagePool pool_{32};
  RadixCache cache_{pool_, kPageTokens, kTestModel};
};

TEST_F(RadixCacheTest, EmptyCacheMatchesNothing) {
  const auto m = cache_.match_prefix("", prompt({1, 2}));
  EXPECT_EQ(m.tokens, 0u);
  EXPECT_TRUE(m.pages.empty());
  EXPECT_EQ(m.node, nullptr);
  cache_.lock(m.node);  // a null node is a no-op, so a miss needs no special case
  cache_.unlock(m.node);
  EXPECT_EQ(cache_.cached_pages(), 0u);
  EXPECT_EQ(cache_.evict(4), 0u);
}

TEST_F(RadixCacheTest, MatchReturnsTheLongestCachedPrefixOfFullBlocks) {
  const auto pages = allocate(3);
  std::vector<PageId> cached;
  RadixCache::Node* last = cache_.insert("", prompt({1, 2, 3}), pages, &cached);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(cached, pages);
  for (PageId p : pages) EXPECT_EQ(pool_.refcount(p), 2u);  // the caller's and the cache's

  auto m = cache_.match_prefix("", prompt({1, 2, 3, 4}));
  EXPECT_EQ(m.tokens, 12u);
  EXPECT_EQ(m.pages, pages);
  EXPECT_EQ(m.node, last);
  m = cache_.match_prefix("", prompt({1, 2, 9}));
  EXPECT_EQ(m.tokens, 8u);
  EXPECT_EQ(m.pages, (std::vector<PageId>{pages[0], pages[1]}));
  EXPECT_EQ(matched("", prompt({2, 3})), 0u);  // a block is cached only after its prefix
  auto one_token_short = prompt({1, 2, 3});
  one_token_short.pop_back();
  EXPECT_EQ(matched("", one_token_short), 8u);
  for (PageId p : pages) pool_.release(p);
}

TEST_F(RadixCacheTest, PartialBlockIsNotCached) {
  auto tokens = prompt({1, 2});
  tokens.push_back(7);  // a partial third block, computed into a third page
  const auto pages = allocate(3);
  std::vector<PageId> cached;
  cache_.insert("", tokens, pages, &cached);
  EXPECT_EQ(cached, (std::vector<PageId>{pages[0], pages[1]}));
  EXPECT_EQ(cache_.cached_pages(), 2u);
  EXPECT_EQ(pool_.refcount(pages[2]), 1u);  // the partial block's page stays the caller's alone
  EXPECT_EQ(matched("", tokens), 8u);

  // Under one block nothing is cached, and no root is left behind for the salt.
  const std::vector<TokenId> short_prompt{1, 2, 3};
  EXPECT_EQ(cache_.insert("short", short_prompt, allocate(1), &cached), nullptr);
  EXPECT_TRUE(cached.empty());
  EXPECT_EQ(cache_.cached_pages(), 2u);
  EXPECT_EQ(cache_.snapshot().size(), 2u);
}

TEST_F(RadixCacheTest, InsertOfCachedBlockKeepsExistingPage) {
  const auto first = cache_alone("", prompt({1}));
  cache_.drain_events();
  const auto second = allocate(2);
  std::vector<PageId> cached;
  cache_.insert("", prompt({1, 2}), second, &cached);
  // Block 1 keeps the page cached first; block 2 is new and takes the caller's page.
  EXPECT_EQ(cached, (std::vector<PageId>{first[0], second[1]}));
  EXPECT_EQ(pool_.refcount(second[0]), 1u);  // not retained: the cache did not take it
  EXPECT_EQ(pool_.refcount(second[1]), 2u);
  EXPECT_EQ(pool_.refcount(first[0]), 1u);
  EXPECT_EQ(cache_.cached_pages(), 2u);
  const auto events = cache_.drain_events();
  ASSERT_EQ(events.size(), 1u);  // only the new block is reported
  EXPECT_EQ(events[0].kind, Kind::kStored);
  pool_.release(second[0]);
  pool_.release(second[1]);
}

TEST_F(RadixCacheTest, NodeHashesAreChainedBlockHashes) {
  PagePool pool(8);
  RadixCache cache(pool, canon::kDefaultBlockSize, kTestModel);
  std::vector<TokenId> tokens(40);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(1000 + 7 * i);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(3, pages));
  cache.insert("tenant", tokens, pages);

  const std::uint64_t root = canon::block_hash_root(kTestModel, "tenant");
  const auto hashes = canon::block_hashes(tokens, canon::kDefaultBlockSize, root);
  ASSERT_EQ(hashes.size(), 2u);
  const auto events = cache.drain_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].block_hash, hashes[0]);
  EXPECT_EQ(events[0].parent_hash, root);
  EXPECT_EQ(events[1].block_hash, hashes[1]);
  EXPECT_EQ(events[1].parent_hash, hashes[0]);
  const auto snapshot = cache.snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[1].block_hash, hashes[1]);
  EXPECT_EQ(snapshot[1].parent_hash, hashes[0]);
  EXPECT_EQ(cache.check_invariants(), "");
  for (PageId p : pages) pool.release(p);
}

TEST_F(RadixCacheTest, EventsReportStoredAndRemovedWithParentHashes) {
  cache_alone("s", prompt({1, 2}));
  const std::uint64_t root = canon::block_hash_root(kTestModel, "s");
  const auto hashes = canon::block_hashes(prompt({1, 2}), kPageTokens, root);
  auto events = cache_.drain_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kStored);
  EXPECT_EQ(events[0].block_hash, hashes[0]);
  EXPECT_EQ(events[0].parent_hash, root);
  EXPECT_EQ(events[0].salt, "s");
  EXPECT_EQ(events[1].kind, Kind::kStored);
  EXPECT_EQ(events[1].block_hash, hashes[1]);
  EXPECT_EQ(events[1].parent_hash, hashes[0]);
  EXPECT_EQ(events[1].salt, "s");
  EXPECT_TRUE(cache_.drain_events().empty());

  EXPECT_EQ(cache_.evict(2), 2u);
  events = cache_.drain_events();
  ASSERT_EQ(events.size(), 2u);  // the leaf goes first, then its parent
  EXPECT_EQ(events[0].kind, Kind::kRemoved);
  EXPECT_EQ(events[0].block_hash, hashes[1]);
  EXPECT_EQ(events[0].salt, "s");
  EXPECT_EQ(events[1].kind, Kind::kRemoved);
  EXPECT_EQ(events[1].block_hash, hashes[0]);
}

TEST_F(RadixCacheTest, SaltsNeverSharePages) {
  const auto tokens = prompt({1, 2});
  const auto a = cache_alone("tenant-a", tokens);
  EXPECT_EQ(matched("tenant-b", tokens), 0u);
  EXPECT_EQ(matched("", tokens), 0u);  // the empty salt is a salt of its own
  const auto b = cache_alone("tenant-b", tokens);
  const auto none = cache_alone("", tokens);
  EXPECT_EQ(cache_.cached_pages(), 6u);
  EXPECT_EQ(cache_.match_prefix("tenant-a", tokens).pages, a);
  EXPECT_EQ(cache_.match_prefix("tenant-b", tokens).pages, b);
  EXPECT_EQ(cache_.match_prefix("", tokens).pages, none);

  std::set<std::uint64_t> hashes;
  for (const auto& block : cache_.snapshot()) hashes.insert(block.block_hash);
  EXPECT_EQ(hashes.size(), 6u);  // equal tokens, different salts: different names too
  // Evicting one salt's blocks leaves the others' alone.
  const auto m = cache_.match_prefix("tenant-b", tokens);
  cache_.lock(m.node);
  const auto n = cache_.match_prefix("", tokens);
  cache_.lock(n.node);
  EXPECT_EQ(cache_.evict(10), 2u);
  EXPECT_EQ(matched("tenant-a", tokens), 0u);
  EXPECT_EQ(matched("tenant-b", tokens), 8u);
  cache_.unlock(m.node);
  cache_.unlock(n.node);
}

TEST_F(RadixCacheTest, EvictsLeastRecentlyUsedUnlockedLeaf) {
  cache_alone("", prompt({1}));
  cache_alone("", prompt({2}));
  cache_alone("", prompt({3}));
  EXPECT_EQ(matched("", prompt({1})), 4u);  // block 1 is now the most recently used

  EXPECT_EQ(cache_.evict(1), 1u);
  EXPECT_EQ(matched("", prompt({2})), 0u);
  EXPECT_EQ(cache_.evict(1), 1u);
  EXPECT_EQ(matched("", prompt({3})), 0u);
  EXPECT_EQ(matched("", prompt({1})), 4u);
}

TEST_F(RadixCacheTest, ParentBecomesEvictableOnlyAfterItsChildrenGo) {
  cache_alone("", prompt({1, 2}));
  cache_alone("", prompt({1, 3}));
  cache_alone("", prompt({4}));
  cache_.drain_events();
  // Leaves by last use: block 2, block 3, block 4. Block 1 was last used with block 3, before
  // block 4, but is an inner node until both its children are gone.
  const auto evict_one = [&] {
    EXPECT_EQ(cache_.evict(1), 1u);
    const auto events = cache_.drain_events();
    EXPECT_EQ(events.size(), 1u);
    return events.empty() ? 0 : events[0].block_hash;
  };
  EXPECT_EQ(evict_one(), block_hash("", prompt({1, 2})));
  EXPECT_EQ(evict_one(), block_hash("", prompt({1, 3})));
  EXPECT_EQ(evict_one(), block_hash("", prompt({1})));
  EXPECT_EQ(evict_one(), block_hash("", prompt({4})));
  EXPECT_EQ(cache_.cached_pages(), 0u);
}

TEST_F(RadixCacheTest, LockedPathIsNeverEvicted) {
  const auto path = cache_alone("", prompt({1, 2, 3}));
  cache_alone("", prompt({4, 5}));
  const auto m = cache_.match_prefix("", prompt({1, 2}));
  cache_.lock(m.node);
  EXPECT_EQ(cache_.evictable_pages(), 3u);  // block 3 (below the lock), 4 and 5

  EXPECT_EQ(cache_.evict(100), 3u);
  EXPECT_EQ(cache_.cached_pages(), 2u);
  EXPECT_EQ(cache_.evictable_pages(), 0u);
  EXPECT_EQ(cache_.evict(100), 0u);
  const auto kept = cache_.match_prefix("", prompt({1, 2, 3}));
  EXPECT_EQ(kept.tokens, 8u);
  EXPECT_EQ(kept.pages, (std::vector<PageId>{path[0], path[1]}));

  cache_.unlock(m.node);
  EXPECT_EQ(cache_.evictable_pages(), 2u);
  EXPECT_EQ(cache_.evict(100), 2u);
  EXPECT_EQ(pool_.used_count(), 0u);
}

TEST_F(RadixCacheTest, LocksAreCounted) {
  cache_alone("", prompt({1, 2}));
  const auto deep = cache_.match_prefix("", prompt({1, 2}));
  const auto shallow = cache_.match_prefix("", prompt({1}));
  cache_.lock(deep.node);
  cache_.lock(deep.node);
  cache_.lock(shallow.node);
  cache_.unlock(deep.node);
  EXPECT_EQ(cache_.evict(10), 0u);
  cache_.unlock(deep.node);
  EXPECT_EQ(cache_.evictable_pages(), 1u);  // block 2; block 1 is still locked directly
  EXPECT_EQ(cache_.evict(10), 1u);
  cache_.unlock(shallow.node);
  EXPECT_EQ(cache_.evict(10), 1u);
}

TEST_F(RadixCacheTest, InsertFromALockedNodeAddsOnlyTheBlocksBelowIt) {
  const auto m = [&] {
    cache_alone("", prompt({1, 2}));
    return cache_.match_prefix("", prompt({1, 2}));
  }();
  cache_.lock(m.node);
  cache_.drain_events();
  const auto mine = allocate(4);
  std::vector<PageId> cached{99};
  RadixCache::Node* last = cache_.insert("", prompt({1, 2, 3, 4}), mine, &cached,
                                         RadixCache::InsertFrom{.node = m.node, .blocks = 2});
  // Only blocks 3 and 4 are walked: their pages, their events, and the node a walk from the
  // root would end at.
  EXPECT_EQ(cached, (std::vector<PageId>{mine[2], mine[3]}));
  const auto events = cache_.drain_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].block_hash, block_hash("", prompt({1, 2, 3})));
  EXPECT_EQ(events[0].parent_hash, block_hash("", prompt({1, 2})));
  EXPECT_EQ(last, cache_.match_prefix("", prompt({1, 2, 3, 4})).node);

  cache_.move_lock(m.node, last);
  EXPECT_EQ(cache_.evictable_pages(), 0u);  // the whole path is pinned by the moved lock
  cache_.unlock(last);
  EXPECT_EQ(cache_.check_invariants(), "");
  for (PageId p : mine) pool_.release(p);
  EXPECT_EQ(cache_.evict(100), 4u);
}

TEST_F(RadixCacheTest, ResumedPrefixProbeFollowsInsertsAndEvictions) {
  const auto tokens = prompt({1, 2, 3});
  RadixCache::PrefixProbe probe;
  EXPECT_EQ(cache_.cached_prefix_tokens("", tokens, probe), 0u);
  cache_alone("", prompt({1}));
  EXPECT_EQ(cache_.cached_prefix_tokens("", tokens, probe), 4u);
  EXPECT_EQ(probe.blocks, 1u);
  cache_alone("", prompt({1, 2}));  // grows below the probe's node: the walk continues there
  EXPECT_EQ(cache_.cached_prefix_tokens("", tokens, probe), 8u);
  EXPECT_EQ(probe.blocks, 2u);
  EXPECT_EQ(cache_.evict(1), 1u);  // block 2, the probe's node: the next walk starts over
  cache_alone("", prompt({5}));    // and may reuse block 2's page for another block
  EXPECT_EQ(cache_.cached_prefix_tokens("", tokens, probe), 4u);
  EXPECT_EQ(probe.blocks, 1u);
  cache_.clear();
  EXPECT_EQ(cache_.cached_prefix_tokens("", tokens, probe), 0u);
  EXPECT_EQ(probe.node, nullptr);
}

TEST_F(RadixCacheTest, EvictCountsOnlyPagesReturnedToPool) {
  const auto pages = allocate(2);
  cache_.insert("", prompt({1, 2}), pages);
  pool_.release(pages[0]);  // the caller still reads block 2's page, without a lock
  EXPECT_EQ(cache_.evictable_pages(), 1u);
  const std::size_t free_before = pool_.free_count();

  // Block 2 is the only leaf: it goes, freeing nothing, so block 1 can go and free its page.
  EXPECT_EQ(cache_.evict(1), 1u);
  EXPECT_EQ(pool_.free_count(), free_before + 1);
  EXPECT_EQ(cache_.cached_pages(), 0u);
  EXPECT_EQ(pool_.refcount(pages[1]), 1u);
  pool_.release(pages[1]);
}

TEST_F(RadixCacheTest, ClearKeepsLockedPathsAndReportsEachRemoval) {
  cache_alone("", prompt({1, 2}));
  cache_alone("x", prompt({3}));
  const auto m = cache_.match_prefix("", prompt({1}));
  cache_.lock(m.node);
  cache_.drain_events();

  cache_.clear();
  auto events = cache_.drain_events();
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) EXPECT_EQ(e.kind, Kind::kRemoved);
  EXPECT_EQ(cache_.cached_pages(), 1u);
  EXPECT_EQ(matched("", prompt({1})), 4u);

  cache_.unlock(m.node);
  cache_.clear();
  events = cache_.drain_events();
  ASSERT_EQ(events.size(), 1u);  // emptied: one kCleared stands for every block
  EXPECT_EQ(events[0].kind, Kind::kCleared);
  EXPECT_EQ(cache_.cached_pages(), 0u);
  EXPECT_EQ(pool_.used_count(), 0u);
}

TEST_F(RadixCacheTest, SnapshotListsParentsFirst) {
  cache_alone("b", prompt({1, 2, 3}));
  cache_alone("a", prompt({1, 2, 4}));
  cache_alone("a", prompt({1, 5}));
  cache_alone("a", prompt({6, 7}));
  cache_alone("", prompt({1}));
  const auto snapshot = cache_.snapshot();
  ASSERT_EQ(snapshot.size(), cache_.cached_pages());
  ASSERT_EQ(snapshot.size(), 10u);

  std::set<std::uint64_t> listed;
  std::string previous_salt;
  for (const auto& block : snapshot) {
    EXPECT_GE(block.salt, previous_salt);  // salts in order, each listed in one run
    previous_salt = block.salt;
    const bool under_root = block.parent_hash == canon::block_hash_root(kTestModel, block.salt);
    EXPECT_TRUE(under_root || listed.count(block.parent_hash) == 1)
        << "block " << canon::hash_hex(block.block_hash) << " listed before its parent";
    listed.insert(block.block_hash);
  }
}

TEST_F(RadixCacheTest, HashCollisionIsAMiss) {
  const auto pages = cache_alone("", prompt({1, 2}));
  RadixCache::Node* second = cache_.match_prefix("", prompt({1, 2})).node;
  ASSERT_NE(second, nullptr);
  // Seam: the node under block 2's hash now holds block 9's tokens, as if block 9 had been
  // cached first and its hash had collided with block 2's.
  const auto intruder = prompt({9});
  std::copy(intruder.begin(), intruder.end(), second->tokens);

  const auto m = cache_.match_prefix("", prompt({1, 2}));
  EXPECT_EQ(m.tokens, 4u);  // the hash hits, the tokens differ: block 2 is a miss
  EXPECT_EQ(m.pages, (std::vector<PageId>{pages[0]}));
  EXPECT_EQ(matched("", prompt({1, 9})), 4u);  // block 9 hashes elsewhere: a plain miss

  // Inserting block 2 cannot take the occupied name; caching stops there and the caller's page
  // is not retained.
  const auto mine = allocate(3);
  std::vector<PageId> cached;
  RadixCache::Node* last = cache_.insert("", prompt({1, 2, 3}), mine, &cached);
  EXPECT_EQ(cached, (std::vector<PageId>{pages[0]}));
  EXPECT_EQ(last, m.node);
  for (PageId p : mine) EXPECT_EQ(pool_.refcount(p), 1u);
  EXPECT_EQ(cache_.cached_pages(), 2u);
  EXPECT_THAT(cache_.check_invariants(), HasSubstr("chain_block_hash"));

  const auto original = prompt({1, 2});
  std::copy(original.begin() + kPageTokens, original.end(), second->tokens);
  EXPECT_EQ(matched("", prompt({1, 2})), 8u);
  for (PageId p : mine) pool_.release(p);
}

TEST_F(RadixCacheTest, CheckInvariantsCatchesABrokenLockCount) {
  cache_alone("", prompt({1, 2}));
  RadixCache::Node* node = cache_.match_prefix("", prompt({1})).node;
  ASSERT_NE(node, nullptr);
  ++node->lock_count;  // seam: a lock that no unlock below accounts for
  EXPECT_THAT(cache_.check_invariants(), HasSubstr("lock count"));
  --node->lock_count;
}

TEST_F(RadixCacheTest, DestroyingTheCacheReturnsItsReferences) {
  PagePool pool(4);
  {
    RadixCache cache(pool, kPageTokens, kTestModel);
    std::vector<PageId> pages;
    ASSERT_TRUE(pool.allocate(2, pages));
    cache.insert("", prompt({1, 2}), pages);
    for (PageId p : pages) pool.release(p);
    EXPECT_EQ(pool.used_count(), 2u);
  }
  EXPECT_EQ(pool.used_count(), 0u);
}

TEST_F(RadixCacheTest, MatchesA32kTokenPromptToTheEnd) {
  constexpr std::size_t kTokens = 32 * 1024;
  constexpr std::size_t kBlocks = kTokens / canon::kDefaultBlockSize;
  PagePool pool(kBlocks);
  RadixCache cache(pool, canon::kDefaultBlockSize, kTestModel);
  std::mt19937 rng(7);
  std::vector<TokenId> tokens(kTokens);
  for (auto& t : tokens) t = rng() % 128000;
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(kBlocks, pages));
  cache.insert("", tokens, pages);
  const auto m = cache.match_prefix("", tokens);
  EXPECT_EQ(m.tokens, kTokens);
  EXPECT_EQ(m.pages, pages);
  cache.lock(m.node);
  EXPECT_EQ(cache.snapshot().size(), kBlocks);
  EXPECT_EQ(cache.check_invariants(), "");
  cache.unlock(m.node);
  for (PageId p : pages) pool.release(p);
  EXPECT_EQ(cache.evict(kBlocks), kBlocks);
}

}  // namespace
}  // namespace prefixgate::engine
