// Property test of the radix cache: a scheduler's worth of random operations checked against a
// reference model after every step (split from radix_cache_test.cpp, which holds the unit tests).
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
#include "prefixgate/engine/radix_cache.h"

namespace prefixgate::engine {
namespace {

using Kind = CacheEvent::Kind;

constexpr std::size_t kB = 4;  // page tokens: short prompts, many blocks
constexpr char kModel[] = "test-model";

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
    bool uses_lock = true;          // some readers only retain pages: their nodes stay evictable
    RadixCache::PrefixProbe probe;  // kept across operations, as a scheduler's reports keep it
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
    // Half the locked sequences continue below the node they pin, as the scheduler does: the
    // model is the same, so the cache must behave as if it had walked from the root.
    const bool from_lock = s.uses_lock && s.locked != nullptr && pick(2) == 0;
    const std::size_t first = from_lock ? s.locked_blocks : 0;
    std::vector<PageId> cached{12345};
    RadixCache::Node* node = cache_.insert(
        s.salt, s.tokens, s.pages, &cached,
        from_lock ? RadixCache::InsertFrom{.node = s.locked, .blocks = s.locked_blocks}
                  : RadixCache::InsertFrom{});
    cached.insert(cached.begin(), expected.begin(),
                  expected.begin() + static_cast<std::ptrdiff_t>(first));
    if (cached != expected) fail("insert reported other cached pages than the model expects");
    if ((node != nullptr) != (blocks > 0)) fail("insert returned the wrong node");
    if (from_lock) counters_["inserted from a lock"]++;
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
      if (s.locked != nullptr && pick(2) == 0) {
        cache_.move_lock(s.locked, node);
      } else {
        cache_.lock(node);
        cache_.unlock(s.locked);
      }
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
    for (Seq& s : seqs_) {
      // A resumed walk must give what a walk from the root gives, whatever happened since.
      if (cache_.cached_prefix_tokens(s.salt, s.tokens, s.probe) !=
          cache_.cached_prefix_tokens(s.salt, s.tokens)) {
        fail("a resumed cached_prefix_tokens disagrees with a walk from the root");
      }
      if (s.probe.node != nullptr) counters_["resumable probes"]++;
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
    for (const char* what :
         {"stored", "removed", "cleared", "matched blocks", "switched to a shared page",
          "admissions refused", "preempted", "inserted from a lock", "resumable probes"}) {
      EXPECT_GT(c.count(what) ? c.at(what) : 0, 10u) << what << ", seed " << seed;
    }
  }
}

}  // namespace
}  // namespace prefixgate::engine
