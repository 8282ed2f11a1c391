#include "server/replica_set.h"

#include <algorithm>

#include "prefixgate/base/check.h"

namespace prefixgate::gateway::server {

const char* events_link_name(EventsLink link) {
  switch (link) {
    case EventsLink::kNone: return "none";
    case EventsLink::kDown: return "down";
    case EventsLink::kUp: return "up";
  }
  return "none";
}

ReplicaSet::ReplicaSet(std::vector<UpstreamConfig> upstreams, std::unique_ptr<RoutingPolicy> policy,
                       IndexConfig index_config, std::size_t eject_after_failures)
    : upstreams_(std::move(upstreams)),
      eject_after_failures_(std::max<std::size_t>(1, eject_after_failures)),
      policy_(std::move(policy)),
      index_(index_config) {
  for (const UpstreamConfig& u : upstreams_) {
    const ReplicaId id = index_.add_replica({u.kind, u.capacity_blocks});
    ReplicaView v;
    v.id = id;
    v.healthy = false;  // until the first health check answers
    if (u.prefill_tokens_per_s > 0 && u.decode_us_per_sequence > 0) {
      v.prefill_seconds_per_token = 1.0 / static_cast<double>(u.prefill_tokens_per_s);
      v.decode_seconds_per_sequence = static_cast<double>(u.decode_us_per_sequence) * 1e-6;
    }
    views_.push_back(v);
    State s;
    s.events = u.kind == ReplicaKind::kOpenai ? EventsLink::kNone : EventsLink::kDown;
    state_.push_back(s);
  }
  PG_DCHECK(state_.size() == index_.replica_count());
}

void ReplicaSet::set_healthy_locked(ReplicaId id, bool healthy) {
  ReplicaView& v = views_[id];
  if (v.healthy == healthy) return;
  v.healthy = healthy;
  healthy_ = healthy ? healthy_ + 1 : healthy_ - 1;
}

namespace {

// Marks the replicas a decision hid from the policy healthy again when it goes out of scope.
struct ShowAgain {
  std::vector<ReplicaView>& views;
  const std::vector<ReplicaId>& ids;
  ~ShowAgain() {
    for (const ReplicaId id : ids) views[id].healthy = true;
  }
};

}  // namespace

RouteDecision ReplicaSet::route(const RouteRequest& request, std::span<const ReplicaId> exclude,
                                Clock::time_point now, bool dry_run) {
  std::unique_lock lock(mu_);
  // The excluded replicas (a retry's: one or two) are hidden from the policy in place, and shown
  // again however the decision ends.
  hidden_.clear();
  for (const ReplicaId id : exclude) {
    if (id < views_.size() && views_[id].healthy) {
      views_[id].healthy = false;
      hidden_.push_back(id);
    }
  }
  const bool none_left = hidden_.size() == healthy_;
  RouteDecision d;
  {
    const ShowAgain show_again{views_, hidden_};
    if (!none_left) d = policy_->route(request, views_, index_, now);
  }
  if (none_left || d.reason == RouteReason::kNoHealthyReplica || d.replica >= views_.size()) {
    return RouteDecision{};
  }
  if (dry_run) return d;
  d.predicted_from = record_routed(index_, *policy_, views_[d.replica], request, d, now);
  if (peer_out_) {
    d.flight = ++next_flight_;
    peer_out_->routed(d.flight, replica_keys_[d.replica], request, d);
    wake_peer_thread(lock);
  }
  return d;
}

void ReplicaSet::prefilled(const RouteDecision& d, std::span<const std::uint64_t> block_hashes,
                           std::size_t prompt_tokens) {
  // The clock is read before the lock, not while others wait for it (the index takes times a
  // little out of order: PrefixIndex's expiry queues put each in its place).
  const Clock::time_point now = Clock::now();
  std::unique_lock lock(mu_);
  RouteRequest request;
  request.block_hashes = block_hashes;
  record_prefilled(index_, views_[d.replica], request, prompt_tokens, now, d.predicted_from);
  if (peer_out_ && d.flight != 0) {
    peer_out_->prefilled(d.flight);
    wake_peer_thread(lock);
  }
}

void ReplicaSet::finish(const RouteDecision& d, std::span<const std::uint64_t> block_hashes,
                        bool prefilled, std::size_t prompt_tokens_if_not_prefilled) {
  const Clock::time_point now = Clock::now();  // before the lock, as prefilled()'s
  std::unique_lock lock(mu_);
  RouteRequest request;
  request.block_hashes = block_hashes;
  record_finished(index_, *policy_, views_[d.replica], request, d, prefilled,
                  prompt_tokens_if_not_prefilled, now);
  if (peer_out_ && d.flight != 0) {
    peer_out_->finished(d.flight);
    wake_peer_thread(lock);
  }
}

void ReplicaSet::wake_peer_thread(std::unique_lock<AdaptiveMutex>& lock) {
  if (peer_pending_ || !peer_wake_) return;  // already woken for what is pending
  peer_pending_ = true;
  lock.unlock();  // the wake-up is a system call: not under the routing lock
  peer_wake_();
}

void ReplicaSet::set_peer_wake(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  PG_CHECK(!peer_wake_);  // once, before any traffic: it is called outside the lock
  peer_wake_ = std::move(wake);
}

void ReplicaSet::enable_peers(std::uint64_t origin, PeerLedgerConfig config) {
  std::lock_guard lock(mu_);
  peer_out_ = std::make_unique<PeerSendWriter>(origin);
  peers_ = std::make_unique<PeerLedger>(origin, config);
  replica_keys_.clear();
  for (const ReplicaView& v : views_) {
    replica_keys_.push_back(replica_key(upstreams_[v.id].url));
    peers_->set_replica_key(replica_keys_.back(), v.id);
  }
}

std::vector<std::string> ReplicaSet::take_peer_datagrams() {
  std::lock_guard lock(mu_);
  peer_pending_ = false;
  if (!peer_out_) return {};
  return peer_out_->take();
}

Status ReplicaSet::apply_peer_datagram(std::string_view datagram) {
  auto parsed = parse_peer_datagram(datagram);  // outside the routing lock
  std::lock_guard lock(mu_);
  if (!peers_) return {};
  if (!parsed) {
    peers_->note_malformed();
    return parsed.error();
  }
  peers_->apply(std::move(*parsed), index_, *policy_, view_of_locked(), Clock::now());
  return {};
}

void ReplicaSet::expire_peer_flights() {
  std::lock_guard lock(mu_);
  if (peers_) peers_->expire(index_, *policy_, view_of_locked(), Clock::now());
}

ReplicaSet::PeerStats ReplicaSet::peer_stats() const {
  std::lock_guard lock(mu_);
  PeerStats out;
  if (!peers_) return out;
  out.counters = peers_->counters();
  out.flights = peers_->flights();
  out.live_peers = peers_->live_peers();
  return out;
}

PeerLedger::ViewOf ReplicaSet::view_of_locked() {
  return [this](ReplicaId id) { return id < views_.size() ? &views_[id] : nullptr; };
}

std::optional<ReplicaId> ReplicaSet::any_healthy(std::span<const ReplicaId> exclude) {
  std::lock_guard lock(mu_);
  for (std::size_t k = 0; k < state_.size(); ++k) {
    const ReplicaId id = static_cast<ReplicaId>((next_any_ + k) % state_.size());
    if (!views_[id].healthy) continue;
    if (std::find(exclude.begin(), exclude.end(), id) != exclude.end()) continue;
    next_any_ = id + 1;
    return id;
  }
  return std::nullopt;
}

std::vector<ReplicaId> ReplicaSet::healthy_replicas() const {
  std::lock_guard lock(mu_);
  std::vector<ReplicaId> out;
  for (const ReplicaView& v : views_) {
    if (v.healthy) out.push_back(v.id);
  }
  return out;
}

void ReplicaSet::record_success(ReplicaId id) {
  std::lock_guard lock(mu_);
  state_[id].consecutive_failures = 0;
}

void ReplicaSet::record_failure(ReplicaId id) {
  std::lock_guard lock(mu_);
  State& s = state_[id];
  if (++s.consecutive_failures >= eject_after_failures_ && views_[id].healthy) {
    set_healthy_locked(id, false);
    reset_index_locked(id);  // its cache may be gone; relearn it from a fresh snapshot
  }
}

void ReplicaSet::health_check_result(ReplicaId id, bool ok) {
  std::lock_guard lock(mu_);
  State& s = state_[id];
  s.ever_checked = true;
  if (ok) {
    if (!views_[id].healthy) s.consecutive_failures = 0;
    set_healthy_locked(id, true);
  } else if (views_[id].healthy) {
    set_healthy_locked(id, false);
    reset_index_locked(id);
  }
}

void ReplicaSet::reset_index_locked(ReplicaId id) {
  index_.reset(id);
  ++state_[id].index_epoch;
}

void ReplicaSet::touch_locked(ReplicaId id, Clock::time_point now) {
  state_[id].last_event = now;
}

std::uint64_t ReplicaSet::apply_snapshot(ReplicaId id, std::span<const std::uint64_t> hashes) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  index_.apply_snapshot(id, hashes);
  touch_locked(id, now);
  return state_[id].index_epoch;
}
std::uint64_t ReplicaSet::index_epoch(ReplicaId id) const {
  std::lock_guard lock(mu_);
  return state_[id].index_epoch;
}
void ReplicaSet::apply_cleared(ReplicaId id) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  index_.apply_cleared(id);
  touch_locked(id, now);
}
void ReplicaSet::apply_load(ReplicaId id, const LoadReport& load) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  apply_load_report(views_[id], load, now);
  state_[id].preemptions_total = load.preemptions_total;
  touch_locked(id, now);
}
void ReplicaSet::reset_index(ReplicaId id) {
  std::lock_guard lock(mu_);
  reset_index_locked(id);
}

std::uint64_t ReplicaSet::apply_key_changes(ReplicaId id, std::span<const KeyChange> changes) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  index_.apply_changes(id, changes);
  touch_locked(id, now);
  return state_[id].index_epoch;
}

void ReplicaSet::set_events_link(ReplicaId id, bool up) {
  std::lock_guard lock(mu_);
  State& s = state_[id];
  if (s.events == EventsLink::kNone) return;
  s.events = up ? EventsLink::kUp : EventsLink::kDown;
  index_.set_events_live(id, up, Clock::now());
}

std::vector<ReplicaSet::Match> ReplicaSet::matches(std::span<const std::uint64_t> hashes,
                                                   Clock::time_point now) const {
  std::lock_guard lock(mu_);
  std::vector<std::size_t> blocks(index_.replica_count()), offloaded(index_.replica_count());
  index_.longest_match(hashes, now, blocks, offloaded);
  std::vector<Match> out;
  for (std::size_t r = 0; r < blocks.size(); ++r) out.push_back({blocks[r], offloaded[r]});
  return out;
}

std::vector<ReplicaStatus> ReplicaSet::status() const {
  // Names and kinds outside the lock: the upstreams never change, and a name is an allocation
  // each, which at 1,000 replicas would hold every decision waiting for a /metrics scrape.
  std::vector<ReplicaStatus> out(upstreams_.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].name = upstreams_[i].url;
    out[i].kind = upstreams_[i].kind;
  }
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  for (const ReplicaView& v : views_) {
    const State& s = state_[v.id];
    ReplicaStatus& r = out[v.id];
    r.events = s.events;
    r.view = v;
    r.index_blocks = index_.blocks(v.id);
    r.preemptions_total = s.preemptions_total;
    if (s.last_event != Clock::time_point{}) {
      // Read before the lock, `now` may precede an event applied while this call waited.
      r.seconds_since_event =
          std::max(0.0, std::chrono::duration<double>(now - s.last_event).count());
    }
  }
  return out;
}

std::size_t ReplicaSet::index_size() const {
  std::lock_guard lock(mu_);
  return index_.size();
}

}  // namespace prefixgate::gateway::server
