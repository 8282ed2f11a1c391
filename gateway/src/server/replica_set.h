// The replicas behind the gateway and everything shared about them: their load and health
// (ReplicaView), the PrefixIndex, and the RoutingPolicy. One mutex serializes it all: the index
// and the policies are plain data structures, not thread-safe, and every operation here is
// short (a route over 64 replicas is microseconds), so a lock beats hopping to a strand. The lock
// spins briefly before it sleeps (adaptive_mutex.h says why).
//
//   ReplicaSet replicas(config.upstreams, std::move(policy), index_config, eject_after);
//   auto d = replicas.route(req, exclude, now);     // also predicts and counts it in flight
//   ...
//   replicas.finish(d, prompt_tokens);
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config.h"
#include "prefixgate/gateway/engine_block_keys.h"
#include "prefixgate/gateway/peer_sends.h"
#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"
#include "server/adaptive_mutex.h"

namespace prefixgate::gateway::server {

// Whether the gateway receives a replica's cache events.
enum class EventsLink {
  kNone,  // openai upstreams: there are none
  kDown,  // not (yet) connected: routing on predictions for it
  kUp,
};
const char* events_link_name(EventsLink link);  // "none", "down", "up"

// A replica's state for metrics and /health.
struct ReplicaStatus {
  std::string name;  // the upstream URL
  ReplicaKind kind = ReplicaKind::kPrefixgate;
  EventsLink events = EventsLink::kNone;
  ReplicaView view;
  std::size_t index_blocks = 0;
  double seconds_since_event = -1;    // -1: no kv_events line yet
  std::size_t preemptions_total = 0;  // from the last load report
};

class ReplicaSet {
 public:
  ReplicaSet(std::vector<UpstreamConfig> upstreams, std::unique_ptr<RoutingPolicy> policy,
             IndexConfig index_config, std::size_t eject_after_failures);

  std::size_t size() const { return upstreams_.size(); }
  const UpstreamConfig& upstream(ReplicaId id) const { return upstreams_[id]; }
  std::string_view policy_name() const { return policy_->name(); }

  // Routes among healthy replicas not in `exclude`; on success predicts the prompt's blocks on
  // the chosen replica and counts the request in flight there. `dry_run` does neither.
  RouteDecision route(const RouteRequest& request, std::span<const ReplicaId> exclude,
                      Clock::time_point now, bool dry_run = false);
  // The prompt's tokens have been prefilled (first byte) / the request `d` routed has ended
  // (`prefilled`: its first token came). `block_hashes` are the prompt's, as routed: their
  // predictions settle. The bookkeeping is replica_load.h's, shared with prefixgate-bench's
  // simulator.
  void prefilled(const RouteDecision& d, std::span<const std::uint64_t> block_hashes,
                 std::size_t prompt_tokens);
  void finish(const RouteDecision& d, std::span<const std::uint64_t> block_hashes, bool prefilled,
              std::size_t prompt_tokens_if_not_prefilled);
  // A healthy replica for requests that carry no prompt (round robin), if any.
  std::optional<ReplicaId> any_healthy(std::span<const ReplicaId> exclude);
  std::vector<ReplicaId> healthy_replicas() const;

  // Health: a successful exchange or health check re-admits; a request failure counts towards
  // ejection; a failed health check ejects at once.
  void record_success(ReplicaId id);
  void record_failure(ReplicaId id);
  void health_check_result(ReplicaId id, bool ok);

  // kv_events. apply_snapshot returns the replica's index epoch (below) as of the snapshot: a
  // /v1/kv_events follower that later sees index_epoch() differ asks for a fresh snapshot, since
  // the index forgot what the stream had told it (an ejection) while the stream went on.
  std::uint64_t apply_snapshot(ReplicaId id, std::span<const std::uint64_t> hashes);
  std::uint64_t index_epoch(ReplicaId id) const;
  void apply_cleared(ReplicaId id);
  void apply_load(ReplicaId id, const LoadReport& load);
  void reset_index(ReplicaId id);
  // Where the replica now holds each block, in order: vllm and sglang events translated to our
  // keys, and prefixgate-engine's stored and removed lines, a read's worth at a time. Returns
  // the replica's index epoch, which changes whenever the index forgets the replica (a failed
  // health check, an ejection): a follower that sees it change sends again every key it knows
  // the replica holds.
  std::uint64_t apply_key_changes(ReplicaId id, std::span<const KeyChange> changes);
  // The event stream connected or lost (prefixgate: its /v1/kv_events subscription).
  void set_events_link(ReplicaId id, bool up);

  // What each replica holds of a prompt (for explain): leading blocks, and how many of those
  // only on a lower tier.
  struct Match {
    std::size_t blocks = 0;
    std::size_t offloaded = 0;
  };
  std::vector<Match> matches(std::span<const std::uint64_t> hashes, Clock::time_point now) const;

  std::vector<ReplicaStatus> status() const;
  std::size_t index_size() const;

  // Peer gateways (peer_sends.h). Before any traffic: from then on each route, first token and
  // end is also written for the peers as `origin`, and their datagrams apply to this gateway's
  // views, index and policy. A replica is known to the peers by replica_key() of its URL.
  void enable_peers(std::uint64_t origin, PeerLedgerConfig config);
  // Called (outside the lock, on the routing thread) when a route, first token or end is
  // written for the peers and nothing else was waiting to be taken: the peer thread's wake-up.
  // Set once, before any traffic, and never changed (it is read without the lock); it must stay
  // callable as long as requests may end.
  void set_peer_wake(std::function<void()> wake);
  // The datagrams written since the last call (none without peers).
  std::vector<std::string> take_peer_datagrams();
  // A peer's datagram, received now. Errors: it did not parse (nothing applied).
  Status apply_peer_datagram(std::string_view datagram);
  // Ends the flights of peers gone quiet (PeerLedger::expire).
  void expire_peer_flights();
  struct PeerStats {
    PeerLedger::Counters counters;
    std::size_t flights = 0;     // peers' requests in flight, as this gateway counts them
    std::size_t live_peers = 0;  // peers heard from within the timeout
  };
  PeerStats peer_stats() const;

 private:
  // What the gateway knows of a replica besides its ReplicaView (views_, by the same id).
  struct State {
    std::size_t consecutive_failures = 0;
    bool ever_checked = false;
    Clock::time_point last_event{};
    std::size_t preemptions_total = 0;
    EventsLink events = EventsLink::kNone;
    std::uint64_t index_epoch = 0;
  };
  void touch_locked(ReplicaId id, Clock::time_point now);  // an event or report came at `now`
  void reset_index_locked(ReplicaId id);
  PeerLedger::ViewOf view_of_locked();

  std::vector<UpstreamConfig> upstreams_;
  std::size_t eject_after_failures_;
  mutable AdaptiveMutex mu_;
  std::unique_ptr<RoutingPolicy> policy_;
  PrefixIndex index_;
  // The replicas' views, handed to the policy as they are: a copy for each decision would be
  // a pass over every view under the lock (136 KB at 1,000 replicas). An excluded replica is
  // marked unhealthy in place for its decision, and marked back before the lock is released.
  std::vector<ReplicaView> views_;
  std::vector<State> state_;
  std::size_t healthy_ = 0;        // views_ marked healthy
  std::vector<ReplicaId> hidden_;  // route(): the excluded replicas hidden for its decision
  void set_healthy_locked(ReplicaId id, bool healthy);
  std::size_t next_any_ = 0;
  // With peers: what this gateway tells them, what they told it, and the keys of its replicas.
  std::unique_ptr<PeerSendWriter> peer_out_;
  std::unique_ptr<PeerLedger> peers_;
  std::vector<std::uint64_t> replica_keys_;
  std::uint64_t next_flight_ = 0;
  std::function<void()> peer_wake_;
  bool peer_pending_ = false;  // written for the peers and not yet taken
  // After writing for the peers under `lock`: wakes the peer thread, after releasing the lock,
  // unless it was woken already for records still pending.
  void wake_peer_thread(std::unique_lock<AdaptiveMutex>& lock);
};

}  // namespace prefixgate::gateway::server
