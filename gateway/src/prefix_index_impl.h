// PrefixIndex's private layout, shared by its event and prediction side (prefix_index.cpp) and
// its lookups (prefix_index_match.cpp). Not part of the gateway's interface.
//
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
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <deque>
#include <functional>
#include <iterator>
#include <list>
#include <utility>

#include "block_table.h"
#include "confirmed_log.h"
#include "prefixgate/base/check.h"
#include "prefixgate/gateway/prefix_index.h"

namespace prefixgate::gateway {
namespace prefix_index_detail {

constexpr std::size_t kBitsPerWord = 64;
constexpr Clock::time_point kNever = Clock::time_point::max();
constexpr std::uint32_t kInlineHolders = 4;
// Replica ids fit in 30 bits: an entry keeps eight bits of its own (seven used) in the top two of
// each word.
constexpr std::uint32_t kMaxReplicas = std::uint32_t{1} << 30;

// A block's entry, 16 bytes, so a table slot (hash and entry) is 24, five of them to a 128-byte
// bucket: what one holder per block costs is mostly this table. Four 32-bit words; their low 30
// bits hold up to kInlineHolders replica ids, or when dense (past that) the row of dense_rows and
// the holder count. Their top two bits hold flag bits, bit k in bit 30 + k % 2 of word k / 2: the
// inline count (bits 0-2), dense (3), predicted (4: a list in Impl::predictions) and offloaded (5:
// a row in Impl::offload_row_of); bits 6 and 7 are free. Each is read and written where it lies: a
// lookup asks dense() and count() of every block it visits, and a store push()es a holder, so
// gathering all six bits from the four words for each of those was a good part of the work.
class Entry {
 public:
  bool dense() const { return bit(kDenseBit); }
  bool predicted() const { return bit(kPredictedBit); }
  bool offloaded() const { return bit(kOffloadedBit); }
  void set_predicted(bool on) { set_bit(kPredictedBit, on); }
  void set_offloaded(bool on) { set_bit(kOffloadedBit, on); }

  std::uint32_t count() const { return dense() ? low(1) : inline_count(); }
  ReplicaId holder(std::uint32_t i) const { return low(i); }  // inline: i < count()
  std::uint32_t row() const { return low(0); }                // dense

  // Inline, count() < kInlineHolders.
  void push(ReplicaId r) {
    const std::uint32_t n = inline_count();
    set_low(n, r);
    set_inline_count(n + 1);
  }
  // Inline: removes holder i (the last one takes its place).
  void erase(std::uint32_t i) {
    const std::uint32_t n = inline_count() - 1;
    set_low(i, low(n));
    set_low(n, 0);
    set_inline_count(n);
  }
  void make_dense(std::uint32_t row, std::uint32_t count) {
    for (std::uint32_t i = 0; i < 4; ++i) set_low(i, 0);
    set_low(0, row);
    set_low(1, count);
    set_inline_count(0);
    set_bit(kDenseBit, true);
  }
  void set_dense_count(std::uint32_t count) { set_low(1, count); }
  void make_empty() {  // dense with no holder left: inline again
    for (std::uint32_t i = 0; i < 4; ++i) set_low(i, 0);
    set_inline_count(0);
    set_bit(kDenseBit, false);
  }

 private:
  static constexpr std::uint32_t kLowMask = kMaxReplicas - 1;
  static constexpr std::uint32_t kCountHighBit = 2;  // the inline count's third bit
  static constexpr std::uint32_t kDenseBit = 3;
  static constexpr std::uint32_t kPredictedBit = 4;
  static constexpr std::uint32_t kOffloadedBit = 5;

  std::uint32_t low(std::uint32_t i) const { return words_[i] & kLowMask; }
  void set_low(std::uint32_t i, std::uint32_t v) { words_[i] = (words_[i] & ~kLowMask) | v; }
  static constexpr std::uint32_t bit_mask(std::uint32_t k) {
    return std::uint32_t{1} << (30 + k % 2);
  }
  bool bit(std::uint32_t k) const { return (words_[k / 2] & bit_mask(k)) != 0; }
  void set_bit(std::uint32_t k, bool on) {
    words_[k / 2] = on ? words_[k / 2] | bit_mask(k) : words_[k / 2] & ~bit_mask(k);
  }
  // Flag bits 0-1 are word 0's top two bits, bit 2 is word 1's bit 30.
  std::uint32_t inline_count() const { return (words_[0] >> 30) | (bit(kCountHighBit) ? 4U : 0U); }
  void set_inline_count(std::uint32_t n) {
    words_[0] = (words_[0] & kLowMask) | ((n & 3U) << 30);
    set_bit(kCountHighBit, (n & 4U) != 0);
  }

  std::array<std::uint32_t, 4> words_{};
};
static_assert(sizeof(Entry) == 16);

inline std::size_t words_for(std::size_t replicas) {
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
  // Moved, never copied, when the index's vector of replicas grows: a copy would leave lru_pos's
  // iterators pointing into the old list. The deques' moves are not declared noexcept, so without
  // this the vector would copy (a replica added after another's predictions, as a policy that
  // grows its own index on first sight of a replica does).
  ReplicaState() = default;
  ReplicaState(ReplicaState&&) noexcept = default;
  ReplicaState& operator=(ReplicaState&&) noexcept = default;
  ReplicaState(const ReplicaState&) = delete;
  ReplicaState& operator=(const ReplicaState&) = delete;

  ReplicaIndexConfig config;
  // The blocks this replica holds confirmed are the entries that name it (Impl::holds); their
  // tier is in the entry too (Entry::offloaded). The log lists them for a clear, reset or
  // snapshot to walk. A store appends to it and a removal is noted in it: a set of the same
  // hashes, kept apart from the index, made each event two more cache misses on an index at fleet
  // scale, more than the index's own.
  ConfirmedLog confirmed_log;
  std::size_t confirmed = 0;  // blocks held confirmed
  std::size_t predicted = 0;  // live prediction records on this replica
  // Predictions expire after the TTL (events confirm what is cached), or else live in the LRU.
  bool events_live = true;
  // With events: (hash, expiry) in expiry order, earliest at the front. An entry whose
  // prediction was refreshed, confirmed or dropped meanwhile is skipped when it comes due.
  // Two queues, one per kind of expiry: a prediction pending its first token expires
  // max_prefill_wait after routing, a settled one prediction_ttl after its first token. Each
  // kind's expiries come in the order they are made (the clock only advances), so pushing is an
  // append and expiring pops the front: no heap, whose sift-downs over a busy replica's millions
  // of entries were a sixth of the time a request holds the routing lock. A time earlier than
  // the last (a caller's clock read before another thread's) is put in its place, found
  // from the back.
  using Expiry = std::pair<std::uint64_t, Clock::time_point>;
  enum ExpiryKind { kPendingExpiry, kSettledExpiry };
  std::array<std::deque<Expiry>, 2> expiry_queues;
  void push_expiry(ExpiryKind kind, std::uint64_t hash, Clock::time_point expiry) {
    std::deque<Expiry>& q = expiry_queues[kind];
    auto at = q.end();
    while (at != q.begin() && std::prev(at)->second > expiry) --at;
    q.emplace(at, hash, expiry);
  }
  // Without events: predictions in recency order, front = most recent; evicted from the back.
  std::list<std::uint64_t> lru;
  boost::unordered_flat_map<std::uint64_t, std::list<std::uint64_t>::iterator> lru_pos;
};

// The first i in [from, n) where held(i) is false (n when there is none), for a `held` true on a
// leading run and false after it, as a prefix cache's blocks are: probes from, from + 1,
// from + 3, from + 7... and the last, until one is not held, then a binary search between the
// last held probe and it. O(log n) probes instead of one per block.
template <class Held>
std::size_t gallop_to_first_unheld(std::size_t from, std::size_t n, Held&& held) {
  std::size_t good = from;  // blocks [from, good) are held
  std::size_t bad = n;      // block `bad` is not (n: none found yet)
  for (std::size_t step = 1; good < n; step *= 2) {
    const std::size_t i = std::min(from + step - 1, n - 1);
    if (!held(i)) {
      bad = i;
      break;
    }
    good = i + 1;
  }
  while (good < bad) {
    const std::size_t mid = good + (bad - good) / 2;
    if (held(mid)) {
      good = mid + 1;
    } else {
      bad = mid;
    }
  }
  return bad;
}

// longest_match's state (prefix_index_match.cpp).
struct Walk;

}  // namespace prefix_index_detail

using namespace prefix_index_detail;  // the private header of one class: its own names

struct PrefixIndex::Impl {
  IndexConfig config;
  std::vector<ReplicaState> replicas;
  // By replica: blocks evicted, removed by events or dropped by the LRU. Apart from `replicas`, so
  // that a policy reading every replica's count for each decision (evicted_counts) reads them
  // from one array, not one ReplicaState each (at 1,000 replicas, a tenth of a decision).
  std::vector<std::uint64_t> evicted;
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

  // Whether r holds the entry's block confirmed.
  bool holds(const Entry& e, ReplicaId r) const {
    if (e.dense()) return test(dense_rows.row(e.row(), words), r);
    for (std::uint32_t i = 0, n = e.count(); i < n; ++i) {
      if (e.holder(i) == r) return true;
    }
    return false;
  }
  bool holds(std::uint64_t hash, ReplicaId r) const {
    const Entry* e = entries.find(hash);
    return e != nullptr && holds(*e, r);
  }

  // r is not a holder yet (holds() says so).
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

  // r is a holder (holds() says so).
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
  void release_if_empty(const Entry& e) {
    if (e.count() == 0 && !e.predicted()) entries.erase_found(e);
  }

  // Drops r's prediction record of `hash`, if any, and frees the entry if nothing else holds it.
  // `only_if_expired_by`: drop only when the record expired by then (a refreshed one stays).
  // `entry`: the block's entry when the caller has found it already (null: looked up here).
  void drop_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point only_if_expired_by,
                       Entry* entry = nullptr) {
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
    Entry* e = entry != nullptr ? entry : entries.find(hash);
    PG_DCHECK(e != nullptr && e->predicted() && e == entries.find(hash));
    e->set_predicted(false);
    release_if_empty(*e);
  }

  void store(ReplicaId r, std::uint64_t hash, CacheTier tier) {
    const bool lower = tier == CacheTier::kOffload;
    Entry& e = entries.try_emplace(hash);
    if (holds(e, r)) {
      if (offloaded(e, hash, r) == lower) return;
      if (lower) {
        set_offloaded(e, hash, r);
      } else {
        clear_offloaded(e, hash, r);
      }
      return;
    }
    add_holder(e, r);
    if (lower) set_offloaded(e, hash, r);
    // A confirmed block needs no prediction: confirmation outlives the TTL and replaces an LRU
    // prediction made while the replica's events were down. (`e` has a holder: it stays.)
    forget_lru(r, hash);
    // Looked up only when predicted: a block another gateway sent there was not.
    if (e.predicted()) drop_prediction(r, hash, kNever, &e);
    log_confirmed(r, hash);
  }

  // Removes r, a holder, from the entry `e` of `hash` (erased if nothing is left in it).
  void unstore(ReplicaId r, std::uint64_t hash, Entry& e) {
    if (offloaded(e, hash, r)) clear_offloaded(e, hash, r);
    remove_holder(e, r);
    --replicas[r].confirmed;
    release_if_empty(e);
  }

  void clear_confirmed(ReplicaId r) {
    ReplicaState& rs = replicas[r];
    const auto unstore_held = [&](std::uint64_t hash) {
      // A block removed since, a repeat, or a sweep's stale copy: held no more once unstored.
      Entry* e = entries.find(hash);
      if (e != nullptr && holds(*e, r)) unstore(r, hash, *e);
    };
    for_each_ahead(rs.confirmed_log.entries().begin(), rs.confirmed_log.entries().end(),
                   unstore_held);
    PG_DCHECK(rs.confirmed == 0);
    rs.confirmed_log.clear();
    if (sweeping == r) {
      sweeping = kNoSweep;
      sweep_notes.clear();
    }
  }

  // Whether a walk over blocks should fetch their table slots ahead. Below kLookaheadMinBlocks
  // the table (128-byte buckets of five slots, at most three quarters full) fits a core's L2
  // and the prefetches would only add work; past it, the blocks an engine evicts were stored
  // long ago and come from memory: a gateway in front of 8 replicas holds that many blocks
  // within minutes.
  static constexpr std::size_t kLookaheadMinBlocks = std::size_t{1} << 14;
  bool worth_fetching_ahead() const { return entries.size() >= kLookaheadMinBlocks; }

  // Calls f(hash) for each hash of [first, last) in order, each one's table slot fetched kAhead
  // calls before (when worth_fetching_ahead), so that the misses of a walk overlap.
  template <class It, class F>
  void for_each_ahead(It first, It last, F&& f) {
    if (!worth_fetching_ahead()) {
      for (; first != last; ++first) f(*first);
      return;
    }
    constexpr std::ptrdiff_t kAhead = 16;
    const std::ptrdiff_t n = last - first;
    for (std::ptrdiff_t i = 0; i < std::min(kAhead, n); ++i) entries.prefetch(first[i]);
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      if (i + kAhead < n) entries.prefetch(first[i + kAhead]);
      f(first[i]);
    }
  }

  // The sweeps of the replicas' confirmed logs (confirmed_log.h): one log at a time, kSweepSteps
  // entries of it (notes gathered or log entries looked at) for each block stored anywhere. A
  // sweep needs about kRemovedShare + 2 a removal of its replica, and an engine removes blocks to
  // make room for the ones it stores, so they keep up, and no event waits for more than
  // kSweepSteps of them. Removals do not advance it: stepped on both, the events applied one call
  // each ran 1.4x slower (BM_IndexApplyEvents), for no gain in runs.
  static constexpr std::size_t kSweepSteps = 16;
  static constexpr ReplicaId kNoSweep = ~ReplicaId{0};
  ReplicaId sweeping = kNoSweep;
  std::deque<ReplicaId> sweeps_waiting;
  HashMultiset sweep_notes;  // the sweep's (ConfirmedLog::start_sweep), kept for the next

  void log_confirmed(ReplicaId r, std::uint64_t hash) {
    ReplicaState& rs = replicas[r];
    ++rs.confirmed;
    rs.confirmed_log.append(hash);
    advance_sweep();
  }

  // A removal reported by r's engine: r, a holder, leaves the entry `e` of `hash`.
  void remove_confirmed(ReplicaId r, std::uint64_t hash, Entry& e) {
    unstore(r, hash, e);
    ReplicaState& rs = replicas[r];
    rs.confirmed_log.note_removed(hash);
    if (rs.confirmed_log.sweep_due(rs.confirmed)) {
      rs.confirmed_log.set_waiting();
      sweeps_waiting.push_back(r);
    }
  }

  // A sweep touches nothing of the table, so a caller's pointer into it stays valid.
  void advance_sweep() {
    if (sweeping == kNoSweep) {
      if (sweeps_waiting.empty()) return;
      sweeping = sweeps_waiting.front();
      sweeps_waiting.pop_front();
      replicas[sweeping].confirmed_log.start_sweep(sweep_notes);
    }
    if (replicas[sweeping].confirmed_log.advance(kSweepSteps, sweep_notes)) sweeping = kNoSweep;
  }

  void forget_lru(ReplicaId r, std::uint64_t hash) {
    ReplicaState& rs = replicas[r];
    if (rs.lru_pos.empty()) return;  // a replica with events: no LRU
    auto it = rs.lru_pos.find(hash);
    if (it == rs.lru_pos.end()) return;
    rs.lru.erase(it->second);
    rs.lru_pos.erase(it);
  }

  void clear_predictions(ReplicaId r) {
    ReplicaState& rs = replicas[r];
    for (std::deque<ReplicaState::Expiry>& q : rs.expiry_queues) {
      for (const auto& [hash, expiry] : q) drop_prediction(r, hash, kNever);
      q.clear();
    }
    for (std::uint64_t hash : rs.lru) drop_prediction(r, hash, kNever);
    rs.lru.clear();
    rs.lru_pos.clear();
    PG_DCHECK(rs.predicted == 0);
  }

  void expire(ReplicaId r, Clock::time_point now) {
    ReplicaState& rs = replicas[r];
    for (std::deque<ReplicaState::Expiry>& queue : rs.expiry_queues) {
      while (!queue.empty() && queue.front().second <= now) {
        const std::uint64_t hash = queue.front().first;
        queue.pop_front();
        drop_prediction(r, hash, now);
      }
    }
  }

  // How many leading blocks of `hashes` r holds confirmed. A long prompt is galloped and then
  // binary-searched, as longest_match does (prefix_index_match.cpp), relying on the same
  // property: what r holds is a leading run. predict() and settle() start after it, so a request
  // whose earlier turns are cached costs a few lookups for them, not one per block.
  std::size_t confirmed_run(ReplicaId r, std::span<const std::uint64_t> hashes) const {
    const std::size_t n = hashes.size();
    const auto held = [&](std::size_t i) { return holds(hashes[i], r); };
    if (n < kConfirmedRunGallopMinBlocks) {
      std::size_t i = 0;
      while (i < n && held(i)) ++i;
      return i;
    }
    return gallop_to_first_unheld(0, n, held);
  }
  // As longest_match's kGallopMinBlocks: from 16 blocks a gallop costs fewer lookups.
  static constexpr std::size_t kConfirmedRunGallopMinBlocks = 16;

  // Adds or refreshes r's prediction of `hash`. Returns false if r already holds it confirmed.
  // `pending`: one more request waits for its first token with this prediction.
  bool upsert_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point expiry,
                         bool pending = false) {
    Entry& e = entries.try_emplace(hash);
    if (holds(e, r)) return false;
    e.set_predicted(true);
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

}  // namespace prefixgate::gateway
