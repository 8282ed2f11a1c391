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

constexpr std::size_t kB = 4;  // page tokens in the unit tests: short prompts, many blocks
constexpr char kModel[] = "test-model";

// A prompt made of whole blocks, block b being the tokens {10b, 10b+1, 10b+2, 10b+3}: equal
// block ids mean equal blocks, which makes tree shapes easy to spell.
std::vector<TokenId> prompt(std::initializer_list<TokenId> blocks) {
  std::vector<TokenId> out;
  for (TokenId b : blocks) {
    for (TokenId j = 0; j < kB; ++j) out.push_back(10 * b + j);
  }
  return out;
}

// The chained hash of the last full block of `tokens` under `salt`.
std::uint64_t block_hash(std::string_view salt, const std::vector<TokenId>& tokens) {
  return canon::block_hashes(tokens, kB, canon::block_hash_root(kModel, salt)).back();
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
    std::vector<PageId> pages = allocate(tokens.size() / kB);
    cache_.insert(salt, tokens, pages);
    for (PageId p : pages) pool_.release(p);
    return pages;
  }

  std::size_t matched(std::string_view salt, const std::vector<TokenId>& tokens) {
    return cache_.match_prefix(salt, tokens).tokens;
  }

  PagePool pool_{32};
  RadixCache cache_{pool_, kB, kModel};
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
  RadixCache cache(pool, canon::kDefaultBlockSize, kModel);
  std::vector<TokenId> tokens(40);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(1000 + 7 * i);
  std::vector<PageId> pages;
  ASSERT_TRUE(pool.allocate(3, pages));
  cache.insert("tenant", tokens, pages);

  const std::uint64_t root = canon::block_hash_root(kModel, "tenant");
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
  const std::uint64_t root = canon::block_hash_root(kModel, "s");
  const auto hashes = canon::block_hashes(prompt({1, 2}), kB, root);
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
    const bool under_root = block.parent_hash == canon::block_hash_root(kModel, block.salt);
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
  std::copy(original.begin() + kB, original.end(), second->tokens);
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
    RadixCache cache(pool, kB, kModel);
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
  RadixCache cache(pool, canon::kDefaultBlockSize, kModel);
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

// ---------------------------------------------------------------------------------------------
// Property test: a scheduler's worth of random operations against a reference model.
//
// Sequences are admitted (match, lock, retain the matched pages, allocate the rest, evicting
// when short), grow, insert what they computed, switch to the shared copies, and finish or
// abort. The model is a map from (salt, full-block token prefix) to the page expected to cache
// it, kept up to date from the cache's own events, each event checked as it is applied. After
// every operation the cache must agree with the model and the pool's refcounts must be exactly
// the cache's references plus the sequences'.

class Simulation {
 public:
  static constexpr std::size_t kPages = 24;
  static constexpr std::size_t kMaxSequences = 6;

  explicit Simulation(std::uint32_t seed) : rng_(seed) {
    // Shared system prompts of awkward lengths, so user turns start mid-block.
    for (std::size_t k = 0; k < system_prompts_.size(); ++k) {
      for (std::size_t i = 0; i < 4 + 5 * k; ++i) {
        system_prompts_[k].push_back(static_cast<TokenId>(100 + 20 * k + i));
      }
    }
  }

  void step() {
    const auto r = pick(1000);
    if (r < 250) {
      seqs_.size() < kMaxSequences ? admit() : finish(pick(seqs_.size()), true);
    } else if (seqs_.empty()) {
      probe();
    } else if (r < 450) {
      insert(pick(seqs_.size()));
    } else if (r < 600) {
      extend(pick(seqs_.size()));
    } else if (r < 720) {
      finish(pick(seqs_.size()), pick(10) < 7);
    } else if (r < 800) {
      finish(pick(seqs_.size()), false);  // abort: nothing computed is kept
    } else if (r < 900) {
      evict(1 + pick(6));
    } else if (r < 997) {
      probe();
    } else {
      // Half the time as an operator's flush of an idle replica, which empties the cache.
      if (pick(2) == 0) finish_all();
      clear();
    }
    if (++steps_ % 64 == 0) rematch_every_leaf();
    check_all();
  }

  const std::string& failure() const { return failure_; }
  const std::map<std::string, std::size_t>& counters() const { return counters_; }
  void finish_all() {
    while (!seqs_.empty()) finish(0, false);
    check_all();
  }
  std::size_t pool_used() const { return pool_.used_count(); }
  std::size_t cached() const { return cache_.cached_pages(); }
  std::size_t evictable() const { return cache_.evictable_pages(); }

 private:
  using Key = std::pair<std::string, std::vector<TokenId>>;  // salt, full-block prefix
  struct Entry {
    PageId page = 0;
    std::uint64_t hash = 0;
    std::uint64_t last_used = 0;
    std::size_t children = 0;
  };
  struct Seq {
    std::string salt;
    std::vector<TokenId> tokens;
    std::vector<PageId> pages;  // one reference on each; ceil(tokens / kB) of them
    RadixCache::Node* locked = nullptr;
    std::size_t locked_blocks = 0;
    bool uses_lock = true;  // some readers only retain pages: their nodes stay evictable
  };
  struct Pending {
    Key key;
    PageId page;
    std::uint64_t parent_hash;
  };

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  void fail(const std::string& what) {
    if (failure_.empty()) failure_ = what;
  }

  static Key key_of(const std::string& salt, const std::vector<TokenId>& tokens,
                    std::size_t blocks) {
    return {salt, std::vector<TokenId>(tokens.begin(), tokens.begin() + blocks * kB)};
  }

  std::vector<TokenId> make_prompt() {
    std::vector<TokenId> tokens;
    if (pick(10) != 0) tokens = system_prompts_[pick(system_prompts_.size())];
    // User turns over a 3-token vocabulary: short blocks repeat, so branches share a lot.
    for (std::size_t n = pick(11); n > 0; --n) tokens.push_back(static_cast<TokenId>(pick(3)));
    return tokens;
  }

  bool is_locked(const Key& key) const {
    for (const Seq& s : seqs_) {
      if (s.uses_lock && s.salt == key.first && s.locked_blocks * kB >= key.second.size() &&
          std::equal(key.second.begin(), key.second.end(), s.tokens.begin())) {
        return true;
      }
    }
    return false;
  }

  std::size_t model_evictable() const {
    std::set<PageId> held;
    for (const Seq& s : seqs_) held.insert(s.pages.begin(), s.pages.end());
    std::size_t n = 0;
    for (const auto& [key, entry] : model_) n += !is_locked(key) && held.count(entry.page) == 0;
    return n;
  }

  // Checks a match against the model and applies its LRU touch to the model.
  void check_match(const std::string& salt, const std::vector<TokenId>& tokens,
                   const RadixCache::Match& m) {
    std::size_t expect = 0;
    while ((expect + 1) * kB <= tokens.size() && model_.count(key_of(salt, tokens, expect + 1))) {
      ++expect;
    }
    if (m.tokens != expect * kB || m.pages.size() != expect ||
        (m.node != nullptr) != (expect > 0)) {
      fail("match of " + std::to_string(tokens.size()) + " tokens under \"" + salt + "\": got " +
           std::to_string(m.tokens) + " tokens, model has " + std::to_string(expect * kB));
      return;
    }
    const std::uint64_t now = ++clock_;
    for (std::size_t i = 0; i < expect; ++i) {
      Entry& e = model_.at(key_of(salt, tokens, i + 1));
      if (m.pages[i] != e.page) fail("match returned a page the model did not cache there");
      e.last_used = now;
    }
    counters_["matched blocks"] += expect;
  }

  void drain() {
    for (const CacheEvent& ev : cache_.drain_events()) {
      if (ev.kind == CacheEvent::Kind::kStored) {
        auto it = pending_.find(ev.block_hash);
        if (it == pending_.end() || model_.count(it->second.key)) {
          fail("unexpected kStored");
          continue;
        }
        if (ev.parent_hash != it->second.parent_hash || ev.salt != it->second.key.first) {
          fail("kStored with the wrong parent hash or salt");
        }
        const Key& key = it->second.key;
        if (key.second.size() > kB) {
          model_.at({key.first, {key.second.begin(), key.second.end() - kB}}).children++;
        }
        model_[key] = Entry{it->second.page, ev.block_hash, 0, 0};
        key_of_hash_[ev.block_hash] = key;
        counters_["stored"]++;
      } else if (ev.kind == CacheEvent::Kind::kRemoved) {
        auto it = key_of_hash_.find(ev.block_hash);
        if (it == key_of_hash_.end()) {
          fail("kRemoved of a block the model does not have");
          continue;
        }
        const Key key = it->second;
        const Entry& entry = model_.at(key);
        if (ev.salt != key.first) fail("kRemoved with the wrong salt");
        if (entry.children != 0 || is_locked(key)) fail("removed a locked or inner block");
        for (const auto& [other, e] : model_) {
          if (e.children == 0 && !is_locked(other) && e.last_used < entry.last_used) {
            fail("removed a leaf that was not the least recently used");
            break;
          }
        }
        if (key.second.size() > kB) {
          model_.at({key.first, {key.second.begin(), key.second.end() - kB}}).children--;
        }
        model_.erase(key);
        key_of_hash_.erase(it);
        counters_["removed"]++;
      } else {
        for (const auto& [key, e] : model_) {
          if (is_locked(key)) fail("kCleared while a block was locked");
        }
        model_.clear();
        key_of_hash_.clear();
        counters_["cleared"]++;
      }
    }
    pending_.clear();
  }

  // Gets `n` more pages for `s`, evicting when the pool is short.
  bool grow(Seq& s, std::size_t n) {
    if (pool_.free_count() < n) evict(n - pool_.free_count());
    return pool_.allocate(n, s.pages);
  }

  void admit() {
    Seq s;
    s.salt = salts_[pick(salts_.size())];
    s.tokens = make_prompt();
    s.uses_lock = pick(10) != 0;
    const auto m = cache_.match_prefix(s.salt, s.tokens);
    check_match(s.salt, s.tokens, m);
    if (s.uses_lock) {
      cache_.lock(m.node);
      s.locked = m.node;
      s.locked_blocks = m.pages.size();
    }
    for (PageId p : m.pages) pool_.retain(p);
    s.pages = m.pages;
    seqs_.push_back(std::move(s));
    Seq& admitted = seqs_.back();
    const std::size_t needed = (admitted.tokens.size() + kB - 1) / kB - admitted.pages.size();
    if (!grow(admitted, needed)) {
      counters_["admissions refused"]++;
      finish(seqs_.size() - 1, false);
    }
  }

  void insert(std::size_t index) {
    Seq& s = seqs_[index];
    const std::size_t blocks = s.tokens.size() / kB;
    const std::uint64_t root = canon::block_hash_root(kModel, s.salt);
    const auto hashes = canon::block_hashes(s.tokens, kB, root);
    std::vector<PageId> expected(blocks);
    std::size_t fresh = 0;
    for (std::size_t i = 0; i < blocks; ++i) {
      Key key = key_of(s.salt, s.tokens, i + 1);
      auto it = model_.find(key);
      if (it != model_.end()) {
        expected[i] = it->second.page;
      } else {
        expected[i] = s.pages[i];
        pending_[hashes[i]] = Pending{std::move(key), s.pages[i], i == 0 ? root : hashes[i - 1]};
        ++fresh;
      }
    }
    std::vector<PageId> cached{12345};
    RadixCache::Node* node = cache_.insert(s.salt, s.tokens, s.pages, &cached);
    if (cached != expected) fail("insert reported other cached pages than the model expects");
    if ((node != nullptr) != (blocks > 0)) fail("insert returned the wrong node");
    const std::size_t stored_before = counters_["stored"];
    drain();
    if (counters_["stored"] - stored_before != fresh) fail("insert stored the wrong count");
    const std::uint64_t now = ++clock_;
    for (std::size_t i = 0; i < blocks; ++i)
      model_.at(key_of(s.salt, s.tokens, i + 1)).last_used = now;
    // Switch to the shared copies, as a scheduler does, and move the lock down the path.
    for (std::size_t i = 0; i < blocks && cached.size() == blocks; ++i) {
      if (cached[i] == s.pages[i]) continue;
      pool_.retain(cached[i]);
      pool_.release(s.pages[i]);
      s.pages[i] = cached[i];
      counters_["switched to a shared page"]++;
    }
    if (s.uses_lock) {
      cache_.lock(node);
      cache_.unlock(s.locked);
      s.locked = node;
      s.locked_blocks = blocks;
    }
  }

  void extend(std::size_t index) {
    Seq& s = seqs_[index];
    for (std::size_t n = 1 + pick(6); n > 0; --n) s.tokens.push_back(static_cast<TokenId>(pick(3)));
    const std::size_t needed = (s.tokens.size() + kB - 1) / kB - s.pages.size();
    if (!grow(s, needed)) {
      counters_["preempted"]++;
      finish(index, false);
    }
  }

  void finish(std::size_t index, bool keep) {
    if (keep) insert(index);
    Seq& s = seqs_[index];
    cache_.unlock(s.locked);
    for (PageId p : s.pages) pool_.release(p);
    seqs_.erase(seqs_.begin() + static_cast<std::ptrdiff_t>(index));
  }

  void evict(std::size_t n) {
    const std::size_t evictable = model_evictable();
    const std::size_t free_before = pool_.free_count();
    const std::size_t freed = cache_.evict(n);
    drain();
    if (freed != std::min(n, evictable)) fail("evict freed " + std::to_string(freed));
    if (pool_.free_count() != free_before + freed) fail("evict miscounted what the pool got");
    counters_["evict calls"]++;
  }

  void probe() {
    const std::string& salt = salts_[pick(salts_.size())];
    const auto tokens = make_prompt();
    check_match(salt, tokens, cache_.match_prefix(salt, tokens));
  }

  void clear() {
    cache_.clear();
    drain();
    for (const auto& [key, e] : model_) {
      if (!is_locked(key)) fail("clear left an unlocked block");
    }
  }

  // Everything cached must still be found, page for page (this touches, in model and cache).
  void rematch_every_leaf() {
    std::vector<Key> leaves;
    for (const auto& [key, e] : model_) {
      if (e.children == 0) leaves.push_back(key);
    }
    for (const Key& key : leaves)
      check_match(key.first, key.second, cache_.match_prefix(key.first, key.second));
  }

  void check_all() {
    if (const std::string broken = cache_.check_invariants(); !broken.empty()) fail(broken);
    if (cache_.cached_pages() != model_.size()) fail("cache and model disagree on size");
    if (cache_.cached_pages() > kPages) fail("more cached pages than the pool has");
    std::vector<std::uint32_t> refs(kPages, 0);
    std::map<PageId, const Key*> cached_by;
    for (const auto& [key, e] : model_) {
      if (!cached_by.emplace(e.page, &key).second) fail("one page caches two blocks");
      refs[e.page]++;
    }
    for (const Seq& s : seqs_) {
      for (std::size_t i = 0; i < s.pages.size(); ++i) {
        refs[s.pages[i]]++;
        // A page a sequence reads from the cache holds exactly its tokens under its salt.
        auto it = cached_by.find(s.pages[i]);
        if (it == cached_by.end()) continue;
        if ((i + 1) * kB > s.tokens.size() || *it->second != key_of(s.salt, s.tokens, i + 1)) {
          fail("a sequence holds a page cached for other tokens or another salt");
        }
      }
    }
    std::size_t used = 0;
    for (PageId p = 0; p < kPages; ++p) {
      if (pool_.refcount(p) != refs[p]) {
        fail("page " + std::to_string(p) + ": refcount " + std::to_string(pool_.refcount(p)) +
             ", expected " + std::to_string(refs[p]));
      }
      used += refs[p] > 0;
    }
    if (pool_.used_count() != used) fail("leaked or lost pages");
    if (cache_.evictable_pages() != model_evictable()) fail("evictable_pages disagrees");
  }

  std::mt19937 rng_;
  PagePool pool_{kPages};
  RadixCache cache_{pool_, kB, kModel};
  const std::array<std::string, 3> salts_{"", "tenant-a", "tenant-b"};
  std::array<std::vector<TokenId>, 4> system_prompts_;
  std::vector<Seq> seqs_;
  std::map<Key, Entry> model_;
  std::unordered_map<std::uint64_t, Key> key_of_hash_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::uint64_t clock_ = 0;
  std::size_t steps_ = 0;
  std::string failure_;
  std::map<std::string, std::size_t> counters_;
};

TEST(RadixCachePropertyTest, RandomSchedulesAgreeWithReferenceModel) {
  for (std::uint32_t seed : {1u, 2u, 3u, 20240820u}) {
    Simulation sim(seed);
    for (int op = 0; op < 20000; ++op) {
      sim.step();
      ASSERT_EQ(sim.failure(), "") << "seed " << seed << ", operation " << op;
    }
    sim.finish_all();
    ASSERT_EQ(sim.failure(), "") << "seed " << seed << " after finishing every sequence";
    // With no sequence left, the pool holds exactly the cache's pages, all of them evictable.
    EXPECT_EQ(sim.pool_used(), sim.cached());
    EXPECT_EQ(sim.evictable(), sim.cached());
    // The schedule must have exercised what it claims to check.
    const auto& c = sim.counters();
    for (const char* what : {"stored", "removed", "cleared", "matched blocks",
                             "switched to a shared page", "admissions refused", "preempted"}) {
      EXPECT_GT(c.count(what) ? c.at(what) : 0, 10u) << what << ", seed " << seed;
    }
  }
}

}  // namespace
}  // namespace prefixgate::engine
