// PrefixIndex: one flat hash map from block hash to a slot; per slot the replicas that hold the
// block confirmed: up to kInlineHolders replica ids in the slot itself (a cache-aware fleet keeps
// one or a few copies of a block), past that a bitmask of ceil(replicas / 64) words in
// `dense_rows` (a block every replica holds, such as a system prompt under round robin). A
// bitmask per slot for every block would cost replicas / 8 bytes each: 128 at 1,000 replicas. A
// second bitmask per slot marks the holders that hold it only on a lower tier (`offload_masks`,
// a subset, allocated only once a replica reports a lower tier: prefixgate-engine never does),
// and a short list of predictions. longest_match walks the
// prompt's hashes once, keeping the mask of replicas whose match is still unbroken (visiting only
// its non-zero words), and stops as soon as that mask is empty.
#include "prefixgate/gateway/prefix_index.h"

#include <algorithm>
#include <array>
#include <bit>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>
#include <functional>
#include <list>
#include <utility>

#include "prefixgate/base/check.h"

namespace prefixgate::gateway {
namespace {

constexpr std::size_t kBitsPerWord = 64;
constexpr Clock::time_point kNever = Clock::time_point::max();
constexpr std::uint32_t kInlineHolders = 4;
constexpr std::uint32_t kNoRow = ~std::uint32_t{0};

// The replicas holding a block confirmed: inline ids while they fit, else a bitmask row.
struct Holders {
  std::array<ReplicaId, kInlineHolders> ids{};  // ids[0, count) while row == kNoRow
  std::uint32_t count = 0;                      // holders, either way
  std::uint32_t row = kNoRow;                   // a row of dense_rows once past kInlineHolders
};

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
// linearly beats any map.
using Predictions = std::vector<Prediction>;

struct ReplicaState {
  ReplicaIndexConfig config;
  // Confirmed blocks and their tier, kept per replica too so cleared/reset/snapshot cost
  // O(replica's blocks) instead of a scan of the whole index.
  boost::unordered_flat_map<std::uint64_t, CacheTier> confirmed;
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

}  // namespace

struct PrefixIndex::Impl {
  IndexConfig config;
  std::vector<ReplicaState> replicas;
  std::size_t words = 0;  // mask words per slot

  boost::unordered_flat_map<std::uint64_t, std::uint32_t> slot_of;
  std::vector<Holders> holders;           // by slot
  std::vector<std::uint64_t> dense_rows;  // row k: dense_rows[k * words, (k + 1) * words)
  std::vector<std::uint32_t> free_rows;
  // The same layout: held only on a lower tier. Empty until the first kOffload block.
  std::vector<std::uint64_t> offload_masks;
  std::vector<Predictions> predictions;  // by slot
  std::vector<std::uint32_t> free_slots;
  std::size_t offload_entries = 0;  // set bits in offload_masks: 0 skips counting them

  std::uint64_t* row(std::uint32_t k) { return dense_rows.data() + std::size_t{k} * words; }
  const std::uint64_t* row(std::uint32_t k) const {
    return dense_rows.data() + std::size_t{k} * words;
  }

  // Word w of the slot's holder mask.
  std::uint64_t held_word(std::uint32_t slot, std::size_t w) const {
    const Holders& h = holders[slot];
    if (h.row != kNoRow) return row(h.row)[w];
    std::uint64_t m = 0;
    for (std::uint32_t i = 0; i < h.count; ++i) {
      if (h.ids[i] / kBitsPerWord == w) m |= std::uint64_t{1} << (h.ids[i] % kBitsPerWord);
    }
    return m;
  }

  // r is not a holder yet (the caller's confirmed set says so).
  void add_holder(std::uint32_t slot, ReplicaId r) {
    Holders& h = holders[slot];
    if (h.row == kNoRow && h.count < kInlineHolders) {
      h.ids[h.count++] = r;
      return;
    }
    if (h.row == kNoRow) {  // one holder more than fits inline: a bitmask row
      std::uint32_t k;
      if (!free_rows.empty()) {
        k = free_rows.back();
        free_rows.pop_back();
      } else {
        k = static_cast<std::uint32_t>(dense_rows.size() / words);
        dense_rows.resize(dense_rows.size() + words, 0);
      }
      for (std::uint32_t i = 0; i < h.count; ++i) set_bit(row(k), h.ids[i]);
      h.row = k;
    }
    set_bit(row(h.row), r);
    ++h.count;
  }

  // r is a holder (the caller's confirmed set says so).
  void remove_holder(std::uint32_t slot, ReplicaId r) {
    Holders& h = holders[slot];
    PG_DCHECK(h.count > 0);
    if (h.row != kNoRow) {
      clear_bit(row(h.row), r);
      if (--h.count == 0) {
        free_rows.push_back(h.row);
        h.row = kNoRow;
      }
      return;
    }
    for (std::uint32_t i = 0; i < h.count; ++i) {
      if (h.ids[i] == r) {
        h.ids[i] = h.ids[--h.count];
        return;
      }
    }
    PG_DCHECK(false, "remove_holder: not a holder");
  }
  std::uint64_t* offload_mask(std::uint32_t slot) {
    if (offload_masks.empty()) offload_masks.assign(predictions.size() * words, 0);
    return offload_masks.data() + std::size_t{slot} * words;
  }
  const std::uint64_t* offload_mask(std::uint32_t slot) const {
    return offload_masks.data() + std::size_t{slot} * words;
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

  // Grows the mask of every slot when a replica needs another word (rare: at replica 65, 129...).
  void widen(std::size_t new_words) {
    for (std::vector<std::uint64_t>* m : {&dense_rows, &offload_masks}) {
      if (m->empty()) continue;
      const std::size_t rows = m->size() / words;
      std::vector<std::uint64_t> wider(rows * new_words, 0);
      for (std::size_t s = 0; s < rows; ++s) {
        std::copy_n(m->begin() + static_cast<std::ptrdiff_t>(s * words), words,
                    wider.begin() + static_cast<std::ptrdiff_t>(s * new_words));
      }
      *m = std::move(wider);
    }
    words = new_words;
  }

  std::uint32_t find_or_insert(std::uint64_t hash) {
    auto [it, inserted] = slot_of.try_emplace(hash, 0);
    if (!inserted) return it->second;
    std::uint32_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(predictions.size());
      predictions.emplace_back();
      holders.emplace_back();
      if (!offload_masks.empty()) offload_masks.resize(offload_masks.size() + words, 0);
    }
    it->second = slot;
    return slot;
  }

  // An entry that no replica holds any more is erased, so memory follows what is cached.
  void release_if_empty(std::uint64_t hash, std::uint32_t slot) {
    if (!predictions[slot].empty() || holders[slot].count != 0) return;
    slot_of.erase(hash);
    predictions[slot].shrink_to_fit();
    free_slots.push_back(slot);
  }

  const std::uint32_t* find(std::uint64_t hash) const {
    auto it = slot_of.find(hash);
    return it == slot_of.end() ? nullptr : &it->second;
  }

  // Drops r's prediction record of `hash`, if any, and frees the entry if nothing else holds it.
  // `only_if_expired_by`: drop only when the record expired by then (a refreshed one stays).
  void drop_prediction(ReplicaId r, std::uint64_t hash, Clock::time_point only_if_expired_by) {
    const std::uint32_t* slot = find(hash);
    if (slot == nullptr) return;
    Predictions& preds = predictions[*slot];
    auto it = std::find_if(preds.begin(), preds.end(),
                           [r](const Prediction& p) { return p.replica == r; });
    if (it == preds.end() || it->expiry > only_if_expired_by) return;
    *it = preds.back();
    preds.pop_back();
    --replicas[r].predicted;
    release_if_empty(hash, *slot);
  }

  void store(ReplicaId r, std::uint64_t hash, CacheTier tier) {
    ReplicaState& rs = replicas[r];
    auto [it, inserted] = rs.confirmed.try_emplace(hash, tier);
    if (!inserted) {
      if (it->second == tier) return;
      it->second = tier;
      const std::uint32_t slot = *find(hash);
      if (tier == CacheTier::kOffload) {
        set_bit(offload_mask(slot), r);
        ++offload_entries;
      } else {
        clear_bit(offload_mask(slot), r);
        --offload_entries;
      }
      return;
    }
    const std::uint32_t slot = find_or_insert(hash);
    add_holder(slot, r);
    if (tier == CacheTier::kOffload) {
      set_bit(offload_mask(slot), r);
      ++offload_entries;
    }
    // A confirmed block needs no prediction: confirmation outlives the TTL and replaces an LRU
    // prediction made while the replica's events were down.
    forget_lru(r, hash);
    drop_prediction(r, hash, kNever);
  }

  void unstore(ReplicaId r, std::uint64_t hash, CacheTier tier) {
    const std::uint32_t* slot = find(hash);
    if (slot == nullptr) return;
    remove_holder(*slot, r);
    if (tier == CacheTier::kOffload) {
      clear_bit(offload_mask(*slot), r);
      --offload_entries;
    }
    release_if_empty(hash, *slot);
  }

  void clear_confirmed(ReplicaId r) {
    ReplicaState& rs = replicas[r];
    for (const auto& [hash, tier] : rs.confirmed) unstore(r, hash, tier);
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
    const std::uint32_t slot = find_or_insert(hash);
    Predictions& preds = predictions[slot];
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
    const std::uint32_t* slot = find(hash);
    if (slot == nullptr) return false;
    Predictions& preds = predictions[*slot];
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
  auto& confirmed = impl_->replicas[replica].confirmed;
  auto it = confirmed.find(hash);
  if (it == confirmed.end()) return;
  ++impl_->replicas[replica].evicted;
  const CacheTier tier = it->second;
  confirmed.erase(it);
  impl_->unstore(replica, hash, tier);
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
  const std::size_t words = im.words;
  std::fill(out.begin(), out.end(), hashes.size());
  std::fill(offloaded.begin(), offloaded.end(), 0);
  if (n_replicas == 0) return;
  const bool count_offloaded = !offloaded.empty() && im.offload_entries > 0;

  // alive: replicas whose match covers every block so far. When a replica drops out at block i,
  // its match is i blocks. Only the words of `alive` that are still non-zero are visited
  // (`live`): after the first blocks there are one or two, whatever the replica count.
  std::vector<std::uint64_t> alive(words, ~std::uint64_t{0});
  if (n_replicas % kBitsPerWord != 0) alive.back() = (std::uint64_t{1} << (n_replicas % 64)) - 1;
  std::vector<std::uint32_t> live(words);
  for (std::size_t w = 0; w < words; ++w) live[w] = static_cast<std::uint32_t>(w);
  std::size_t live_count = words;

  // Slots are looked up a batch ahead: the lookups are independent, so their cache misses
  // overlap instead of queueing behind each block's work (a large index is memory-bound).
  constexpr std::size_t kBatch = 16;
  const std::uint32_t* slots[kBatch];
  for (std::size_t base = 0; base < hashes.size() && live_count > 0; base += kBatch) {
    const std::size_t batch = std::min(kBatch, hashes.size() - base);
    for (std::size_t k = 0; k < batch; ++k) slots[k] = im.find(hashes[base + k]);
    for (std::size_t k = 0; k < batch && live_count > 0; ++k) {
      const std::size_t i = base + k;
      const std::uint32_t* slot = slots[k];
      const Predictions* preds = slot == nullptr ? nullptr : &im.predictions[*slot];
      std::size_t kept = 0;
      for (std::size_t j = 0; j < live_count; ++j) {
        const std::uint32_t w = live[j];
        std::uint64_t held = slot == nullptr ? 0 : im.held_word(*slot, w);
        if (preds != nullptr) {
          for (const Prediction& p : *preds) {
            if (p.replica / kBitsPerWord == w && p.expiry > now) {
              held |= std::uint64_t{1} << (p.replica % 64);
            }
          }
        }
        std::uint64_t dropped = alive[w] & ~held;
        while (dropped != 0) {
          const int bit = std::countr_zero(dropped);
          out[w * kBitsPerWord + static_cast<std::size_t>(bit)] = i;
          dropped &= dropped - 1;
        }
        alive[w] &= held;
        if (count_offloaded && slot != nullptr) {
          std::uint64_t lower = alive[w] & im.offload_mask(*slot)[w];
          while (lower != 0) {
            ++offloaded[w * kBitsPerWord + static_cast<std::size_t>(std::countr_zero(lower))];
            lower &= lower - 1;
          }
        }
        if (alive[w] != 0) live[kept++] = w;
      }
      live_count = kept;
    }
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
  return impl_->slot_of.size();
}

}  // namespace prefixgate::gateway
