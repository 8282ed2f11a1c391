// PrefixIndex: one open-addressing table (block_table.h) from block hash to a 16-byte entry holding
// the replicas that hold the block confirmed: up to four replica ids in the entry itself (a
// cache-aware fleet keeps one or a few copies of a block), past that a bitmask of
// ceil(replicas / 64) words in `dense_rows` (a block every replica holds, such as a system prompt
// under round robin). A bitmask per block for every block would cost replicas / 8 bytes each: 128
// at 1,000 replicas. Two rarer things live apart, keyed by hash, and a flag in the entry says
// whether to look: the block's predictions (only while the gateway predicts it somewhere), and a
// second bitmask of the holders that hold it only on a lower tier (only once a replica reports a
// lower tier: prefixgate-engine never does). A lookup is thus one probe of one table, whose entry
// is the whole answer for almost every block.
//
// longest_match keeps the mask of replicas whose match is still unbroken (visiting only its
// non-zero words) and stops as soon as that mask is empty. A prefix cache holds a block only
// with its parent (engines evict leaves first, and a chained hash names the whole prefix), so
// the set of replicas holding block i shrinks as i grows, and each replica's match ends at one
// boundary that a galloping and then binary search finds: from the first block not yet known to
// be held by every replica still matching, it probes that block, those 1, 3, 7, 15... further
// on and the last, until one of them drops out, searches for the first block where one does, drops
// those there, and goes on. That is O(k log n) probes for k distinct match lengths instead of one
// per block (a prompt of 2,048 blocks held by one replica of 1,000: 14 lookups). It equals the
// block-by-block walk whenever each replica's held blocks (confirmed, or predicted and not expired)
// are a prefix of the prompt. When they are not, a hole in the middle of a replica's run can be
// skipped: its match is then some i where it holds block i - 1 and not block i, never shorter than
// the first hole. The block-by-block walk stays where it is exact or cheaper: prompts under
// kGallopMinBlocks, the count of lower-tier blocks (per block, asked for and some replica has
// them), and the rest of a gallop that has spent its probe budget on many distinct match lengths.
#include "prefixgate/gateway/prefix_index.h"

#include <algorithm>
#include <array>
#include <bit>
#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>
#include <functional>
#include <list>
#include <utility>

#include "block_table.h"
#include "prefixgate/base/check.h"

namespace prefixgate::gateway {
namespace {

constexpr std::size_t kBitsPerWord = 64;
constexpr Clock::time_point kNever = Clock::time_point::max();
constexpr std::uint32_t kInlineHolders = 4;
// Replica ids fit in 30 bits: an entry keeps six bits of its own in the top two of each word.
constexpr std::uint32_t kMaxReplicas = std::uint32_t{1} << 30;
// longest_match gallops over prompts of at least this many blocks. With the entries in cache a
// gallop is as fast at 8 blocks and faster from 16 (gateway_bench, 1,000 replicas); from memory,
// the linear walk prefetches 16 entries at once where a binary search waits for each probe, and
// short prompts stay exact whatever the holders. A gallop that has spent n / divisor probes
// (many distinct match lengths, each probe a cache miss of its own) walks the rest linearly.
constexpr std::size_t kGallopMinBlocks = 64;
constexpr std::size_t kGallopProbeBudgetDivisor = 16;

// A block's entry, 16 bytes, so a table bucket (hash and entry) is 24: what one holder per block
// costs is mostly this table. Four 32-bit words; their low 30 bits hold up to kInlineHolders
// replica ids, or when dense (past that) the row of dense_rows and the holder count. Their top
// two bits together hold the flags: the inline count (3 bits), dense, predicted (a list in
// Impl::predictions) and offloaded (a row in Impl::offload_row_of).
class Entry {
 public:
  bool dense() const { return flags() & kDense; }
  bool predicted() const { return flags() & kPredicted; }
  bool offloaded() const { return flags() & kOffloaded; }
  void set_predicted(bool on) { set_flag(kPredicted, on); }
  void set_offloaded(bool on) { set_flag(kOffloaded, on); }

  std::uint32_t count() const { return dense() ? low(1) : flags() & kCountMask; }
  ReplicaId holder(std::uint32_t i) const { return low(i); }  // inline: i < count()
  std::uint32_t row() const { return low(0); }                // dense

  // Inline, count() < kInlineHolders.
  void push(ReplicaId r) {
    const std::uint32_t n = count();
    set_low(n, r);
    set_flags((flags() & ~kCountMask) | (n + 1));
  }
  // Inline: removes holder i (the last one takes its place).
  void erase(std::uint32_t i) {
    const std::uint32_t n = count() - 1;
    set_low(i, low(n));
    set_low(n, 0);
    set_flags((flags() & ~kCountMask) | n);
  }
  void make_dense(std::uint32_t row, std::uint32_t count) {
    for (std::uint32_t i = 0; i < 4; ++i) set_low(i, 0);
    set_low(0, row);
    set_low(1, count);
    set_flags((flags() & ~kCountMask) | kDense);
  }
  void set_dense_count(std::uint32_t count) { set_low(1, count); }
  void make_empty() {  // dense with no holder left: inline again
    for (std::uint32_t i = 0; i < 4; ++i) set_low(i, 0);
    set_flags(flags() & ~(kCountMask | kDense));
  }

 private:
  static constexpr std::uint32_t kLowMask = kMaxReplicas - 1;
  static constexpr std::uint32_t kCountMask = 7;
  static constexpr std::uint32_t kDense = 8;
  static constexpr std::uint32_t kPredicted = 16;
  static constexpr std::uint32_t kOffloaded = 32;

  std::uint32_t low(std::uint32_t i) const { return words_[i] & kLowMask; }
  void set_low(std::uint32_t i, std::uint32_t v) { words_[i] = (words_[i] & ~kLowMask) | v; }
  std::uint32_t flags() const {
    std::uint32_t f = 0;
    for (std::uint32_t i = 0; i < 4; ++i) f |= (words_[i] >> 30) << (2 * i);
    return f;
  }
  void set_flags(std::uint32_t f) {
    for (std::uint32_t i = 0; i < 4; ++i) {
      words_[i] = (words_[i] & kLowMask) | (((f >> (2 * i)) & 3) << 30);
    }
  }
  void set_flag(std::uint32_t flag, bool on) { set_flags(on ? flags() | flag : flags() & ~flag); }

  std::array<std::uint32_t, 4> words_{};
};
static_assert(sizeof(Entry) == 16);

std::size_t words_for(std::size_t replicas) {
  return (replicas + kBitsPerWord - 1) / kBitsPerWord;
}

struct Prediction {
  ReplicaId replica;
  Clock::time_point expiry;  // kNever for kOpenai replicas (their LRU bounds them instead)
  // Requests routed with this prediction whose first token has not come (settle()); while any
  // is, the expiry is their routing time + max_prefill_wait.
  std::uint32_t pending = 0;
};

// Prediction lists are short (a prefix is routed to one or two replicas), so a vector scanned
// linearly beats any map, and its first two live in the list itself: a block is predicted and
// then confirmed or expired all the time, and a heap allocation each time would cost more than
// the lookups.
using Predictions = boost::container::small_vector<Prediction, 2>;

// Rows of `words` 64-bit words, reused through a free list.
struct Rows {
  std::vector<std::uint64_t> bits;  // row k: bits[k * words, (k + 1) * words)
  std::vector<std::uint32_t> free;

  std::uint32_t allocate(std::size_t words) {
    if (!free.empty()) {
      const std::uint32_t k = free.back();
      free.pop_back();
      return k;
    }
    const auto k = static_cast<std::uint32_t>(bits.size() / words);
    bits.resize(bits.size() + words, 0);
    return k;
  }
  // The row must be all zero again.
  void release(std::uint32_t k) { free.push_back(k); }
  std::uint64_t* row(std::uint32_t k, std::size_t words) {
    return bits.data() + std::size_t{k} * words;
  }
  const std::uint64_t* row(std::uint32_t k, std::size_t words) const {
    return bits.data() + std::size_t{k} * words;
  }
  // Re-lays the rows out for another word count (a replica past a multiple of 64: rare).
  void widen(std::size_t words, std::size_t new_words) {
    if (bits.empty()) return;
    const std::size_t rows = bits.size() / words;
    std::vector<std::uint64_t> wider(rows * new_words, 0);
    for (std::size_t s = 0; s < rows; ++s) {
      std::copy_n(bits.begin() + static_cast<std::ptrdiff_t>(s * words), words,
                  wider.begin() + static_cast<std::ptrdiff_t>(s * new_words));
    }
    bits = std::move(wider);
  }
};

struct ReplicaState {
  ReplicaIndexConfig config;
  // Confirmed blocks, kept per replica too so cleared/reset/snapshot cost O(replica's blocks)
  // instead of a scan of the whole index. Their tier is in the index (Entry::offloaded).
  boost::unordered_flat_set<std::uint64_t> confirmed;
  std::size_t predicted = 0;  // live prediction records on this replica
  std::uint64_t evicted = 0;  // blocks evicted: removed by events, or dropped by the LRU
  // Predictions expire after the TTL (events confirm what is cached), or else live in the LRU.
  bool events_live = true;
  // With events: a min-heap of (hash, expiry), earliest on top (expiries are not monotonic in
  // the order predictions are made: a pending one lives longer than a settled one). An entry
  // whose prediction was refreshed, confirmed or dropped meanwhile is skipped when popped.
  using Expiry = std::pair<std::uint64_t, Clock::time_point>;
  std::vector<Expiry> expiry_queue;
  void push_expiry(std::uint64_t hash, Clock::time_point expiry) {
    expiry_queue.emplace_back(hash, expiry);
    std::push_heap(expiry_queue.begin(), expiry_queue.end(), later);
  }
  static bool later(const Expiry& a, const Expiry& b) { return a.second > b.second; }
  // Without events: predictions in recency order, front = most recent; evicted from the back.
  std::list<std::uint64_t> lru;
  boost::unordered_flat_map<std::uint64_t, std::list<std::uint64_t>::iterator> lru_pos;
};

// longest_match's state: the replicas whose match is unbroken so far. When a replica drops out
// at block i, its match is i blocks; those never dropping match the whole prompt. Only the words of
// `alive` that are still non-zero are visited (`live`): after the first blocks there are one or
// two, whatever the replica count.
struct Walk {
  std::span<const std::uint64_t> hashes;
  Clock::time_point now;
  std::span<std::size_t> out;
  std::span<std::size_t> offloaded;
  bool count_offloaded = false;
  std::vector<std::uint64_t> alive = {};  // bit r % 64 of word r / 64: replica r still matches
  std::vector<std::uint32_t> live = {};   // live[0, live_count): the non-zero words of alive
  std::size_t live_count = 0;
};

}  // namespace

struct PrefixIndex::Impl {
  IndexConfig config;
  std::vector<ReplicaState> replicas;
  std::size_t words = 0;  // mask words per row

  BlockTable<Entry> entries;
  Rows dense_rows;  // holder masks of the entries past kInlineHolders
  // Only blocks some replica predicts (Entry::predicted): few next to the confirmed ones.
  boost::unordered_flat_map<std::uint64_t, Predictions> predictions;
  // Only blocks some holder holds on a lower tier only (Entry::offloaded): a row of offload_rows.
  boost::unordered_flat_map<std::uint64_t, std::uint32_t> offload_row_of;
  Rows offload_rows;
  std::size_t offload_entries = 0;  // set bits in offload_rows: 0 skips counting them

  // longest_match (below the class): the linear walk, the galloping one, and their steps.
  void walk_linear(Walk& walk, std::size_t from) const;
  void walk_galloping(Walk& walk) const;
  // Block i: the alive replicas that do not hold it (`entry`: its entry, or null) match i
  // blocks and leave the walk; those that stay count it if they hold it on a lower tier only.
  void advance(Walk& walk, std::size_t i, const Entry* entry) const;
  // Whether every alive replica holds block i (confirmed, or predicted and not expired).
  bool all_alive_hold(const Walk& walk, std::size_t i) const;
  // Word w of the mask of replicas holding a block: its entry (or null) and its predictions
  // (or null) that have not expired at `now`.
  std::uint64_t holders_word(const Entry* entry, const Predictions* preds, std::size_t w,
                             Clock::time_point now) const;
  const Predictions* predictions_of(const Entry* entry, std::uint64_t hash) const;

  // Word w of the entry's holder mask.
  std::uint64_t held_word(const Entry& e, std::size_t w) const {
    if (e.dense()) return dense_rows.row(e.row(), words)[w];
    std::uint64_t m = 0;
    for (std::uint32_t i = 0, n = e.count(); i < n; ++i) {
      const ReplicaId r = e.holder(i);
      if (r / kBitsPerWord == w) m |= std::uint64_t{1} << (r % kBitsPerWord);
    }
    return m;
  }

  // r is not a holder yet (the caller's confirmed set says so).
  void add_holder(Entry& e, ReplicaId r) {
    if (!e.dense() && e.count() < kInlineHolders) {
      e.push(r);
      return;
    }
    if (!e.dense()) {  // one holder more than fits inline: a bitmask row
      const std::uint32_t k = dense_rows.allocate(words);
      for (std::uint32_t i = 0; i < kInlineHolders; ++i) {
        set_bit(dense_rows.row(k, words), e.holder(i));
      }
      e.make_dense(k, kInlineHolders);
    }
    set_bit(dense_rows.row(e.row(), words), r);
    e.set_dense_count(e.count() + 1);
  }

  // r is a holder (the caller's confirmed set says so).
  void remove_holder(Entry& e, ReplicaId r) {
    PG_DCHECK(e.count() > 0);
    if (e.dense()) {
      clear_bit(dense_rows.row(e.row(), words), r);
      if (e.count() == 1) {
        dense_rows.release(e.row());
        e.make_empty();
      } else {
        e.set_dense_count(e.count() - 1);
      }
      return;
    }
    for (std::uint32_t i = 0, n = e.count(); i < n; ++i) {
      if (e.holder(i) == r) {
        e.erase(i);
        return;
      }
    }
    PG_DCHECK(false, "remove_holder: not a holder");
  }

  const std::uint64_t* offload_row(std::uint64_t hash) const {
    return offload_rows.row(offload_row_of.find(hash)->second, words);
  }
  bool offloaded(const Entry& e, std::uint64_t hash, ReplicaId r) const {
    return e.offloaded() && test(offload_row(hash), r);
  }
  void set_offloaded(Entry& e, std::uint64_t hash, ReplicaId r) {
    if (!e.offloaded()) {
      offload_row_of.emplace(hash, offload_rows.allocate(words));
      e.set_offloaded(true);
    }
    set_bit(offload_rows.row(offload_row_of.find(hash)->second, words), r);
    ++offload_entries;
  }
  void clear_offloaded(Entry& e, std::uint64_t hash, ReplicaId r) {
    auto it = offload_row_of.find(hash);
    std::uint64_t* m = offload_rows.row(it->second, words);
    clear_bit(m, r);
    --offload_entries;
    if (std::all_of(m, m + words, [](std::uint64_t word) { return word == 0; })) {
      offload_rows.release(it->second);
      offload_row_of.erase(it);
      e.set_offloaded(false);
    }
  }

  static void set_bit(std::uint64_t* m, ReplicaId r) {
    m[r / kBitsPerWord] |= std::uint64_t{1} << (r % kBitsPerWord);
  }
  static void clear_bit(std::uint64_t* m, ReplicaId r) {
    m[r / kBitsPerWord] &= ~(std::uint64_t{1} << (r % kBitsPerWord));
  }
  static bool test(const std::uint64_t* m, ReplicaId r) {
    return (m[r / kBitsPerWord] >> (r % kBitsPerWord)) & 1U;
  }

  // Grows every row when a replica needs another word (rare: at replica 65, 129...).
  void widen(std::size_t new_words) {
    dense_rows.widen(words, new_words);
    offload_rows.widen(words, new_words);
    words = new_words;
  }

  // An entry that no replica holds or predicts any more is erased, so memory follows what is
  // cached.
  void release_if_empty(std::uint64_t hash, const Entry& e) {
    if (e.count() == 0 && !e.predicted()) entries.erase(hash);
  }

  // Drops r's prediction record of `hash`, if any, and frees the entry if nothing else holds it.
  // `only_if_expired_by`: drop only when the record expired by then (a refreshed one stays).
  void drop_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point only_if_expired_by) {
    auto pit = predictions.find(hash);
    if (pit == predictions.end()) return;
    Predictions& preds = pit->second;
    auto it = std::find_if(preds.begin(), preds.end(),
                           [r](const Prediction& p) { return p.replica == r; });
    if (it == preds.end() || it->expiry > only_if_expired_by) return;
    *it = preds.back();
    preds.pop_back();
    --replicas[r].predicted;
    if (!preds.empty()) return;
    predictions.erase(pit);
    Entry* e = entries.find(hash);
    PG_DCHECK(e != nullptr && e->predicted());
    e->set_predicted(false);
    release_if_empty(hash, *e);
  }

  void store(ReplicaId r, std::uint64_t hash, CacheTier tier) {
    ReplicaState& rs = replicas[r];
    const bool lower = tier == CacheTier::kOffload;
    if (!rs.confirmed.insert(hash).second) {
      Entry& e = *entries.find(hash);
      if (offloaded(e, hash, r) == lower) return;
      if (lower) {
        set_offloaded(e, hash, r);
      } else {
        clear_offloaded(e, hash, r);
      }
      return;
    }
    Entry& e = entries.try_emplace(hash);
    add_holder(e, r);
    if (lower) set_offloaded(e, hash, r);
    // A confirmed block needs no prediction: confirmation outlives the TTL and replaces an LRU
    // prediction made while the replica's events were down. (`e` has a holder: it stays.)
    forget_lru(r, hash);
    drop_prediction(r, hash, kNever);
  }

  // r held `hash` confirmed (its confirmed set no longer says so).
  void unstore(ReplicaId r, std::uint64_t hash) {
    Entry* found = entries.find(hash);
    if (found == nullptr) return;
    Entry& e = *found;
    if (offloaded(e, hash, r)) clear_offloaded(e, hash, r);
    remove_holder(e, r);
    release_if_empty(hash, e);
  }

  void clear_confirmed(ReplicaId r) {
    ReplicaState& rs = replicas[r];
    for (std::uint64_t hash : rs.confirmed) unstore(r, hash);
    rs.confirmed.clear();
  }

  void forget_lru(ReplicaId r, std::uint64_t hash) {
    ReplicaState& rs = replicas[r];
    auto it = rs.lru_pos.find(hash);
    if (it == rs.lru_pos.end()) return;
    rs.lru.erase(it->second);
    rs.lru_pos.erase(it);
  }

  void clear_predictions(ReplicaId r) {
    ReplicaState& rs = replicas[r];
    for (const auto& [hash, expiry] : rs.expiry_queue) drop_prediction(r, hash, kNever);
    for (std::uint64_t hash : rs.lru) drop_prediction(r, hash, kNever);
    rs.expiry_queue.clear();
    rs.lru.clear();
    rs.lru_pos.clear();
    PG_DCHECK(rs.predicted == 0);
  }

  void expire(ReplicaId r, Clock::time_point now) {
    ReplicaState& rs = replicas[r];
    auto& queue = rs.expiry_queue;
    while (!queue.empty() && queue.front().second <= now) {
      std::pop_heap(queue.begin(), queue.end(), ReplicaState::later);
      const std::uint64_t hash = queue.back().first;
      queue.pop_back();
      drop_prediction(r, hash, now);
    }
  }

  // Adds or refreshes r's prediction of `hash`. Returns false if r already holds it confirmed.
  // `pending`: one more request waits for its first token with this prediction.
  bool upsert_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point expiry,
                         bool pending = false) {
    if (replicas[r].confirmed.contains(hash)) return false;
    entries.try_emplace(hash).set_predicted(true);
    Predictions& preds = predictions[hash];
    auto it = std::find_if(preds.begin(), preds.end(),
                           [r](const Prediction& p) { return p.replica == r; });
    if (it != preds.end()) {
      // A pending request keeps the later of the two expiries; a settled one takes its own.
      it->expiry = it->pending > 0 ? std::max(it->expiry, expiry) : expiry;
      if (pending) ++it->pending;
    } else {
      preds.push_back({r, expiry, pending ? 1u : 0u});
      ++replicas[r].predicted;
    }
    return true;
  }

  // One request predicted with `hash` on r got its first token: when no other is still waiting,
  // the prediction expires at `expiry`. False when there was nothing to shorten.
  bool settle_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point expiry) {
    auto pit = predictions.find(hash);
    if (pit == predictions.end()) return false;
    Predictions& preds = pit->second;
    auto it = std::find_if(preds.begin(), preds.end(),
                           [r](const Prediction& p) { return p.replica == r; });
    if (it == preds.end() || it->pending == 0) return false;
    if (--it->pending > 0 || it->expiry <= expiry) return false;
    it->expiry = expiry;
    return true;
  }
};

PrefixIndex::PrefixIndex(IndexConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
}
PrefixIndex::~PrefixIndex() = default;
PrefixIndex::PrefixIndex(PrefixIndex&&) noexcept = default;
PrefixIndex& PrefixIndex::operator=(PrefixIndex&&) noexcept = default;

ReplicaId PrefixIndex::add_replica(ReplicaIndexConfig config) {
  if (config.kind != ReplicaKind::kPrefixgate && config.capacity_blocks == 0) {
    config.capacity_blocks = kDefaultOpenaiCapacityBlocks;
  }
  PG_CHECK(impl_->replicas.size() < kMaxReplicas);
  const auto id = static_cast<ReplicaId>(impl_->replicas.size());
  ReplicaState state;
  state.config = config;
  state.events_live = config.kind == ReplicaKind::kPrefixgate;
  impl_->replicas.push_back(std::move(state));
  const std::size_t needed = words_for(impl_->replicas.size());
  if (needed > impl_->words) impl_->widen(needed);
  return id;
}

std::size_t PrefixIndex::replica_count() const {
  return impl_->replicas.size();
}

void PrefixIndex::apply_snapshot(ReplicaId replica, std::span<const std::uint64_t> hashes) {
  PG_DCHECK(replica < impl_->replicas.size());
  impl_->clear_confirmed(replica);
  for (std::uint64_t hash : hashes) impl_->store(replica, hash, CacheTier::kPrimary);
}

void PrefixIndex::apply_stored(ReplicaId replica, std::uint64_t hash, CacheTier tier) {
  PG_DCHECK(replica < impl_->replicas.size());
  impl_->store(replica, hash, tier);
}

void PrefixIndex::apply_removed(ReplicaId replica, std::uint64_t hash) {
  PG_DCHECK(replica < impl_->replicas.size());
  if (impl_->replicas[replica].confirmed.erase(hash) == 0) return;
  ++impl_->replicas[replica].evicted;
  impl_->unstore(replica, hash);
}

void PrefixIndex::apply_cleared(ReplicaId replica) {
  PG_DCHECK(replica < impl_->replicas.size());
  impl_->clear_confirmed(replica);
}

void PrefixIndex::reset(ReplicaId replica) {
  PG_DCHECK(replica < impl_->replicas.size());
  impl_->clear_confirmed(replica);
  impl_->clear_predictions(replica);
}

void PrefixIndex::set_events_live(ReplicaId replica, bool live, Clock::time_point now) {
  PG_DCHECK(replica < impl_->replicas.size());
  Impl& im = *impl_;
  ReplicaState& rs = im.replicas[replica];
  if (rs.config.kind == ReplicaKind::kPrefixgate || rs.events_live == live) return;
  rs.events_live = live;
  if (!live) return;  // TTL predictions expire as they would have; new ones go to the LRU
  // The LRU's predictions get the TTL from now, most recent first, while events catch up.
  const Clock::time_point expiry = now + im.config.prediction_ttl;
  for (std::uint64_t hash : rs.lru) {
    if (im.upsert_prediction(replica, hash, expiry)) rs.push_expiry(hash, expiry);
  }
  rs.lru.clear();
  rs.lru_pos.clear();
}

void PrefixIndex::predict(ReplicaId replica, std::span<const std::uint64_t> hashes,
                          Clock::time_point now) {
  PG_DCHECK(replica < impl_->replicas.size());
  Impl& im = *impl_;
  ReplicaState& rs = im.replicas[replica];
  im.expire(replica, now);
  if (rs.events_live) {
    const Clock::time_point expiry = now + im.config.max_prefill_wait;
    for (std::uint64_t hash : hashes) {
      if (im.upsert_prediction(replica, hash, expiry, /*pending=*/true)) {
        rs.push_expiry(hash, expiry);
      }
    }
    return;
  }
  // No events: touched from the last block to the first, so the first blocks end up most recent
  // and eviction takes a prompt's tail before its prefix (as an engine's LRU frees a sequence's
  // blocks tail first); evicting a prefix block would orphan every block after it.
  for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
    const std::uint64_t hash = *it;
    if (!im.upsert_prediction(replica, hash, kNever)) continue;
    auto pos = rs.lru_pos.find(hash);
    if (pos != rs.lru_pos.end()) {
      rs.lru.splice(rs.lru.begin(), rs.lru, pos->second);
    } else {
      rs.lru.push_front(hash);
      rs.lru_pos.emplace(hash, rs.lru.begin());
    }
  }
  while (rs.lru.size() > rs.config.capacity_blocks) {
    const std::uint64_t victim = rs.lru.back();
    rs.lru.pop_back();
    rs.lru_pos.erase(victim);
    im.drop_prediction(replica, victim, kNever);
    ++rs.evicted;
  }
}

void PrefixIndex::settle(ReplicaId replica, std::span<const std::uint64_t> hashes,
                         Clock::time_point now) {
  PG_DCHECK(replica < impl_->replicas.size());
  Impl& im = *impl_;
  ReplicaState& rs = im.replicas[replica];
  if (!rs.events_live) return;  // LRU predictions do not expire
  const Clock::time_point expiry = now + im.config.prediction_ttl;
  for (std::uint64_t hash : hashes) {
    if (im.settle_prediction(replica, hash, expiry)) rs.push_expiry(hash, expiry);
  }
}

void PrefixIndex::expire_predictions(Clock::time_point now) {
  for (ReplicaId r = 0; r < impl_->replicas.size(); ++r) impl_->expire(r, now);
}

void PrefixIndex::longest_match(std::span<const std::uint64_t> hashes, Clock::time_point now,
                                std::span<std::size_t> out,
                                std::span<std::size_t> offloaded) const {
  const Impl& im = *impl_;
  const std::size_t n_replicas = im.replicas.size();
  PG_DCHECK(out.size() == n_replicas);
  PG_DCHECK(offloaded.empty() || offloaded.size() == n_replicas);
  // Zero first, so that the replicas that drop out at the first block (most of a large fleet)
  // cost no write of their own.
  std::fill(out.begin(), out.end(), 0);
  std::fill(offloaded.begin(), offloaded.end(), 0);
  if (n_replicas == 0 || hashes.empty()) return;

  Walk walk{.hashes = hashes,
            .now = now,
            .out = out,
            .offloaded = offloaded,
            .count_offloaded = !offloaded.empty() && im.offload_entries > 0};
  walk.alive.assign(im.words, ~std::uint64_t{0});
  if (n_replicas % kBitsPerWord != 0) {
    walk.alive.back() = (std::uint64_t{1} << (n_replicas % kBitsPerWord)) - 1;
  }
  walk.live.resize(im.words);
  for (std::size_t w = 0; w < im.words; ++w) walk.live[w] = static_cast<std::uint32_t>(w);
  walk.live_count = im.words;
  // Lower-tier blocks are counted one by one, so that count needs every block probed.
  if (walk.count_offloaded || hashes.size() < kGallopMinBlocks) {
    im.walk_linear(walk, 0);
  } else {
    im.walk_galloping(walk);
  }
  // The replicas still alive hold the whole prompt.
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    for (std::uint64_t bits = walk.alive[w]; bits != 0; bits &= bits - 1) {
      out[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(bits))] = hashes.size();
    }
  }
}

const Predictions* PrefixIndex::Impl::predictions_of(const Entry* entry, std::uint64_t hash) const {
  return entry != nullptr && entry->predicted() ? &predictions.find(hash)->second : nullptr;
}

std::uint64_t PrefixIndex::Impl::holders_word(const Entry* entry, const Predictions* preds,
                                              std::size_t w, Clock::time_point now) const {
  if (entry == nullptr) return 0;
  std::uint64_t held = held_word(*entry, w);
  if (preds != nullptr) {
    for (const Prediction& p : *preds) {
      if (p.replica / kBitsPerWord == w && p.expiry > now) {
        held |= std::uint64_t{1} << (p.replica % kBitsPerWord);
      }
    }
  }
  return held;
}

bool PrefixIndex::Impl::all_alive_hold(const Walk& walk, std::size_t i) const {
  const std::uint64_t hash = walk.hashes[i];
  const Entry* entry = entries.find(hash);
  if (entry == nullptr) return false;
  const Predictions* preds = predictions_of(entry, hash);
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    if ((walk.alive[w] & ~holders_word(entry, preds, w, walk.now)) != 0) return false;
  }
  return true;
}

void PrefixIndex::Impl::advance(Walk& walk, std::size_t i, const Entry* entry) const {
  const std::uint64_t hash = walk.hashes[i];
  const Predictions* preds = predictions_of(entry, hash);
  const std::uint64_t* lower =
      walk.count_offloaded && entry != nullptr && entry->offloaded() ? offload_row(hash) : nullptr;
  std::size_t kept = 0;
  for (std::size_t j = 0; j < walk.live_count; ++j) {
    const std::uint32_t w = walk.live[j];
    const std::uint64_t held = holders_word(entry, preds, w, walk.now);
    // out[] is 0 already for those dropping at the first block.
    std::uint64_t dropped = i == 0 ? 0 : walk.alive[w] & ~held;
    while (dropped != 0) {
      walk.out[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(dropped))] = i;
      dropped &= dropped - 1;
    }
    walk.alive[w] &= held;
    if (lower != nullptr) {
      std::uint64_t off = walk.alive[w] & lower[w];
      while (off != 0) {
        ++walk.offloaded[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(off))];
        off &= off - 1;
      }
    }
    if (walk.alive[w] != 0) walk.live[kept++] = w;
  }
  walk.live_count = kept;
}

void PrefixIndex::Impl::walk_linear(Walk& walk, std::size_t from) const {
  // Entries are prefetched a batch ahead, then looked up: the lookups are independent, so their
  // cache misses overlap instead of queueing behind each block's work (a large index is
  // memory-bound). The entry holds the holders, so one probe per block is all a block without
  // predictions costs.
  constexpr std::size_t kBatch = 16;
  const std::span<const std::uint64_t> hashes = walk.hashes;
  const Entry* found[kBatch];
  for (std::size_t base = from; base < hashes.size() && walk.live_count > 0; base += kBatch) {
    const std::size_t batch = std::min(kBatch, hashes.size() - base);
    for (std::size_t k = 0; k < batch; ++k) entries.prefetch(hashes[base + k]);
    for (std::size_t k = 0; k < batch; ++k) found[k] = entries.find(hashes[base + k]);
    for (std::size_t k = 0; k < batch && walk.live_count > 0; ++k) {
      advance(walk, base + k, found[k]);
    }
  }
}

void PrefixIndex::Impl::walk_galloping(Walk& walk) const {
  const std::span<const std::uint64_t> hashes = walk.hashes;
  const std::size_t n = hashes.size();
  std::size_t probes = 0;
  auto holds = [&](std::size_t i) {
    ++probes;
    return all_alive_hold(walk, i);
  };
  std::size_t next = 0;  // every alive replica holds blocks [0, next)
  while (next < n && walk.live_count > 0) {
    // Many distinct match lengths cost a gallop and a search each: past the budget, the rest
    // is walked block by block, which from here gives the same answer.
    if (probes > n / kGallopProbeBudgetDivisor) {
      walk_linear(walk, next);
      return;
    }
    // Gallop: blocks next, next + 1, next + 3, next + 7... then the last. Their places do not
    // depend on the answers, so all their lookups are prefetched at once.
    for (std::size_t step = 1; next + step - 1 < n; step *= 2) {
      entries.prefetch(hashes[next + step - 1]);
    }
    entries.prefetch(hashes[n - 1]);
    std::size_t good = next;  // every alive replica holds blocks [0, good)
    std::size_t bad = n;      // some alive replica lacks block `bad` (n: none found)
    for (std::size_t step = 1; good < n; step *= 2) {
      const std::size_t i = std::min(next + step - 1, n - 1);
      if (!holds(i)) {
        bad = i;
        break;
      }
      good = i + 1;
    }
    if (bad == n) return;  // the alive replicas hold the whole prompt
    // The first block some alive replica lacks is in [good, bad]: a binary search.
    while (good < bad) {
      const std::size_t mid = good + (bad - good) / 2;
      if (holds(mid)) {
        good = mid + 1;
      } else {
        bad = mid;
      }
    }
    advance(walk, bad, entries.find(hashes[bad]));
    next = bad + 1;
  }
}

std::uint64_t PrefixIndex::evicted_blocks(ReplicaId replica) const {
  PG_DCHECK(replica < impl_->replicas.size());
  return impl_->replicas[replica].evicted;
}

std::size_t PrefixIndex::blocks(ReplicaId replica) const {
  PG_DCHECK(replica < impl_->replicas.size());
  const ReplicaState& rs = impl_->replicas[replica];
  return rs.confirmed.size() + rs.predicted;
}

std::size_t PrefixIndex::size() const {
  return impl_->entries.size();
}

}  // namespace prefixgate::gateway
