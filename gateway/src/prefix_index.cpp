// PrefixIndex: what fills it (engine events, snapshots, predictions and their expiry) and its
// bookkeeping. The layout is in prefix_index_impl.h, the lookups in prefix_index_match.cpp.
#include "prefixgate/gateway/prefix_index.h"

#include <algorithm>
#include <utility>

#include "prefix_index_impl.h"

namespace prefixgate::gateway {

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
  impl_->evicted.push_back(0);
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

void PrefixIndex::apply_changes(ReplicaId replica, std::span<const KeyChange> changes) {
  PG_DCHECK(replica < impl_->replicas.size());
  // A chunk's table slots are fetched first (when Impl::worth_fetching_ahead), so that the
  // processor overlaps their cache misses; then the chunk's changes, in order, find their entries
  // in cache.
  constexpr std::size_t kChunk = 16;
  const bool ahead = impl_->worth_fetching_ahead();
  for (std::size_t base = 0; base < changes.size(); base += kChunk) {
    const std::size_t end = std::min(changes.size(), base + kChunk);
    if (ahead) {
      for (std::size_t i = base; i < end; ++i) impl_->entries.prefetch(changes[i].key);
    }
    for (std::size_t i = base; i < end; ++i) {
      const KeyChange& c = changes[i];
      switch (c.state) {
        case KeyState::kAbsent: apply_removed(replica, c.key); break;
        case KeyState::kOffload: impl_->store(replica, c.key, CacheTier::kOffload); break;
        case KeyState::kPrimary: impl_->store(replica, c.key, CacheTier::kPrimary); break;
      }
    }
  }
}

void PrefixIndex::apply_removed(ReplicaId replica, std::uint64_t hash) {
  PG_DCHECK(replica < impl_->replicas.size());
  Entry* e = impl_->entries.find(hash);
  if (e == nullptr || !impl_->holds(*e, replica)) return;
  ++impl_->evicted[replica];
  impl_->remove_confirmed(replica, hash, *e);
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
    if (im.upsert_prediction(replica, hash, expiry)) {
      rs.push_expiry(ReplicaState::kSettledExpiry, hash, expiry);
    }
  }
  rs.lru.clear();
  rs.lru_pos.clear();
}

std::size_t PrefixIndex::predict(ReplicaId replica, std::span<const std::uint64_t> hashes,
                                 Clock::time_point now) {
  PG_DCHECK(replica < impl_->replicas.size());
  Impl& im = *impl_;
  ReplicaState& rs = im.replicas[replica];
  im.expire(replica, now);
  if (rs.events_live) {
    const Clock::time_point expiry = now + im.config.max_prefill_wait;
    const std::size_t confirmed = im.confirmed_run(replica, hashes);
    const std::span<const std::uint64_t> todo = hashes.subspan(confirmed);
    im.for_each_ahead(todo.begin(), todo.end(), [&](std::uint64_t hash) {
      if (im.upsert_prediction(replica, hash, expiry, /*pending=*/true)) {
        rs.push_expiry(ReplicaState::kPendingExpiry, hash, expiry);
      }
    });
    return confirmed;
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
    ++im.evicted[replica];
  }
  return 0;
}

void PrefixIndex::settle(ReplicaId replica, std::span<const std::uint64_t> hashes,
                         Clock::time_point now, std::size_t predicted_from) {
  PG_DCHECK(replica < impl_->replicas.size());
  Impl& im = *impl_;
  ReplicaState& rs = im.replicas[replica];
  if (!rs.events_live) return;  // LRU predictions do not expire
  const Clock::time_point expiry = now + im.config.prediction_ttl;
  // A block confirmed since predict() has no prediction left to settle (store() dropped it).
  const std::size_t from = predicted_from == kPredictedFromUnknown
                               ? im.confirmed_run(replica, hashes)
                               : std::min(predicted_from, hashes.size());
  for (std::uint64_t hash : hashes.subspan(from)) {
    if (im.settle_prediction(replica, hash, expiry)) {
      rs.push_expiry(ReplicaState::kSettledExpiry, hash, expiry);
    }
  }
}

void PrefixIndex::expire_predictions(Clock::time_point now) {
  for (ReplicaId r = 0; r < impl_->replicas.size(); ++r) impl_->expire(r, now);
}

std::uint64_t PrefixIndex::evicted_blocks(ReplicaId replica) const {
  PG_DCHECK(replica < impl_->replicas.size());
  return impl_->evicted[replica];
}

std::span<const std::uint64_t> PrefixIndex::evicted_counts() const {
  return impl_->evicted;
}

std::size_t PrefixIndex::blocks(ReplicaId replica) const {
  PG_DCHECK(replica < impl_->replicas.size());
  const ReplicaState& rs = impl_->replicas[replica];
  return rs.confirmed + rs.predicted;
}

std::size_t PrefixIndex::size() const {
  return impl_->entries.size();
}

std::size_t PrefixIndex::mapped_bytes() const {
  return impl_->entries.mapped_bytes() + impl_->sweep_notes.mapped_bytes();
}

}  // namespace prefixgate::gateway
