// The event loop of `prefixgate-bench simulate`. Timed events (arrivals, step ends, load-report
// ticks) sit in a min-heap by (time, sequence number), so equal times keep their order and a run
// is deterministic. Cache events and load reports travel from a replica to the gateways with one
// fixed delay, so they arrive in the order they were sent: a FIFO beside the heap, not heap
// entries, and at equal times they land before anything else happens. Peered gateways' datagrams
// to each other (peer_sends.h) travel the same way with their own delay, a second FIFO, landing
// after the engines' deliveries of the same time and before timed events.
#include "simulate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <iostream>
#include <memory>
#include <queue>
#include <span>
#include <vector>

#include "prefixgate/gateway/peer_sends.h"
#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/replica_load.h"

namespace prefixgate::bench {
namespace {

using gateway::Clock;

Clock::time_point virtual_time(double seconds) {
  return Clock::time_point{} +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Inter-token gaps, too many to keep (a run streams tens of millions of tokens): a histogram of
// 1 %-wide logarithmic buckets from 1 us to 10^4 s, so its percentiles are within 1 %.
class GapHistogram {
 public:
  GapHistogram() : counts_(kBuckets, 0) {}
  void add(double seconds) {
    ++count_;
    sum_ += seconds;
    counts_[bucket(seconds)] += 1;
  }
  Summary summary() const {
    Summary s;
    s.count = count_;
    if (count_ == 0) return s;
    s.mean = sum_ / static_cast<double>(count_);
    s.p50 = quantile(0.50);
    s.p90 = quantile(0.90);
    s.p99 = quantile(0.99);
    return s;
  }

 private:
  static constexpr double kMin = 1e-6;
  static constexpr double kGrowth = 1.01;
  static constexpr std::size_t kBuckets = 2320;  // 1e-6 * 1.01^2320 > 1e4
  static std::size_t bucket(double v) {
    if (!(v > kMin)) return 0;
    const auto b = static_cast<std::size_t>(std::log(v / kMin) / std::log(kGrowth)) + 1;
    return std::min(b, kBuckets - 1);
  }
  double quantile(double q) const {
    const double target = q * static_cast<double>(count_);
    double seen = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      seen += static_cast<double>(counts_[b]);
      if (seen >= target && counts_[b] > 0) {
        // The bucket's geometric middle.
        return b == 0 ? kMin : kMin * std::pow(kGrowth, static_cast<double>(b) - 0.5);
      }
    }
    return kMin * std::pow(kGrowth, static_cast<double>(kBuckets));
  }
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

struct SimGateway {
  gateway::PrefixIndex index;
  std::unique_ptr<gateway::RoutingPolicy> policy;
  std::vector<gateway::ReplicaView> views;
  // With peer_delay_s >= 0: what it tells its peers, and what they told it.
  gateway::PeerSendWriter peer_out;
  gateway::PeerLedger peers;
};

// A datagram from one gateway to another, peer_delay_s after it was written.
struct PeerDelivery {
  double t = 0;
  std::uint32_t to = 0;
  std::shared_ptr<const std::string> datagram;
};

// One request, from its arrival at a gateway to its last token.
struct Flight {
  std::uint32_t session = 0;
  std::uint32_t turn = 0;
  std::uint32_t gateway = 0;
  std::uint32_t replica = 0;
  gateway::RouteDecision decision;
  std::size_t uncached = 0;                 // what the gateway counted as queued prefill
  std::vector<std::uint64_t> block_hashes;  // as routed: their predictions settle at the end
  double arrival = 0;
  double admitted = -1;
  double first = -1;
  double last = -1;
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;
  std::size_t tokens = 0;
  bool measured = false;
};

// The request a flight was routed with, as the bookkeeping after routing needs it.
gateway::RouteRequest routed(const Flight& f) {
  gateway::RouteRequest request;
  request.block_hashes = f.block_hashes;
  return request;
}

struct KvChange {
  std::uint64_t hash = 0;
  engine::CacheEvent::Kind kind = engine::CacheEvent::Kind::kStored;
};

struct Delivery {
  double t = 0;
  std::uint32_t replica = 0;
  bool has_load = false;
  gateway::LoadReport load;
  std::vector<KvChange> changes;
};

enum class EventKind : std::uint8_t { kArrival, kStepEnd, kLoadTick };

struct Event {
  double t = 0;
  std::uint64_t seq = 0;
  EventKind kind = EventKind::kArrival;
  std::uint32_t a = 0;  // arrival: session; step end, tick: replica
  std::uint32_t b = 0;  // arrival: turn
};

struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.t != y.t ? x.t > y.t : x.seq > y.seq;
  }
};

class Simulation {
 public:
  Simulation(const SimWorkload& workload, const SimConfig& config)
      : workload_(workload), config_(config), spray_(config.seed ^ 0x5bd1e995ULL) {}

  Result<SimResult> run() {
    const auto wall0 = std::chrono::steady_clock::now();
    gateways_.reserve(config_.gateways);
    for (std::size_t g = 0; g < config_.gateways; ++g) {
      gateway::PolicyConfig pc = config_.policy_config;
      pc.seed = config_.seed + g;
      // Each gateway knows how many share the fleet, as a deployment's configuration says
      // (routing.gateways); a policy's own `gateways=N` option overrides it.
      // Peered gateways see every gateway's sends: each routes as the only one would.
      pc.cache_aware.gateways = peered() ? 1 : config_.gateways;
      pc.cache_aware.peered = peered();
      if (peered()) pc.cache_aware.peer_delay_seconds = config_.peer_delay_s;
      auto policy = gateway::make_policy(config_.policy, pc);
      if (!policy) return policy.error();
      const std::uint64_t origin = g + 1;
      SimGateway& gw = gateways_.emplace_back(SimGateway{gateway::PrefixIndex(config_.index_config),
                                                         std::move(*policy),
                                                         {},
                                                         gateway::PeerSendWriter(origin),
                                                         gateway::PeerLedger(origin)});
      for (std::size_t r = 0; r < config_.replicas; ++r) {
        gw.views.push_back({});
        gw.views.back().id = gw.index.add_replica({});
        gw.peers.set_replica_key(r, gw.views.back().id);  // a replica's key: its index
      }
    }
    replicas_.reserve(config_.replicas);
    for (std::size_t r = 0; r < config_.replicas; ++r) {
      replicas_.push_back(std::make_unique<SimReplica>(
          config_.replica_kinds.empty() ? config_.replica
                                        : config_.replica_kinds[r % config_.replica_kinds.size()]));
    }
    ticking_.assign(config_.replicas, false);
    next_tick_.assign(config_.replicas, 0.0);
    per_replica_.assign(config_.replicas, 0);
    limit_ = workload_.requests();
    if (config_.max_requests > 0) limit_ = std::min(limit_, config_.max_requests);
    flights_.reserve(limit_);
    // A prefixgate-engine writes its first load line as a gateway subscribes, before any
    // traffic: every gateway knows each replica's KV size and speed from the start (a replica
    // that never reported would be taken as full, and the cost could not be in seconds).
    for (SimGateway& gw : gateways_) {
      for (std::size_t r = 0; r < config_.replicas; ++r) {
        gateway::apply_load_report(gw.views[r], replicas_[r]->load_report(), virtual_time(now_));
      }
    }
    schedule_sessions();

    while (true) {
      const bool have_delivery = !deliveries_.empty();
      const bool have_peer = !peer_deliveries_.empty();
      const bool have_event = !heap_.empty();
      if (!have_delivery && !have_peer && !have_event) break;
      const double event_t = have_event ? heap_.top().t : INFINITY;
      const double peer_t = have_peer ? peer_deliveries_.front().t : INFINITY;
      if (have_delivery && deliveries_.front().t <= std::min(event_t, peer_t)) {
        Delivery d = std::move(deliveries_.front());
        deliveries_.pop_front();
        now_ = d.t;
        deliver(d);
        continue;
      }
      if (have_peer && peer_t <= event_t) {
        PeerDelivery d = std::move(peer_deliveries_.front());
        peer_deliveries_.pop_front();
        now_ = d.t;
        if (Status s = deliver_peer(d); !s) return s.error();
        continue;
      }
      const Event e = heap_.top();
      heap_.pop();
      now_ = e.t;
      ++events_;
      switch (e.kind) {
        case EventKind::kArrival:
          if (Status s = arrive(e.a, e.b); !s) return s.error();
          break;
        case EventKind::kStepEnd: step_end(e.a); break;
        case EventKind::kLoadTick: load_tick(e.a); break;
      }
      if (config_.progress && (events_ & 0xfffff) == 0) print_progress(wall0);
    }
    return results(std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
  }

 private:
  bool peered() const { return config_.peer_delay_s >= 0 && config_.gateways > 1; }

  // What gateway g wrote for its peers reaches each of them peer_delay_s from now.
  void flush_peers(std::uint32_t g) {
    if (!peered()) return;
    for (std::string& datagram : gateways_[g].peer_out.take()) {
      auto shared = std::make_shared<const std::string>(std::move(datagram));
      for (std::uint32_t h = 0; h < gateways_.size(); ++h) {
        if (h != g) peer_deliveries_.push_back({now_ + config_.peer_delay_s, h, shared});
      }
    }
  }

  Status deliver_peer(const PeerDelivery& d) {
    SimGateway& gw = gateways_[d.to];
    ++events_;
    return gw.peers.apply(
        *d.datagram, gw.index, *gw.policy,
        [&gw](gateway::ReplicaId r) { return r < gw.views.size() ? &gw.views[r] : nullptr; },
        virtual_time(now_));
  }

  void push(double t, EventKind kind, std::uint32_t a, std::uint32_t b = 0) {
    heap_.push(Event{t, ++seq_, kind, a, b});
  }

  // Every session's first turn, at its arrival. Later turns are pushed when the previous ends.
  void schedule_sessions() {
    const std::size_t n = workload_.sessions();
    std::vector<double> start(n, 0.0);
    std::size_t requests = 0, sessions = 0;
    // The sessions that fit the request limit, in arrival order.
    std::vector<std::size_t> order(n);
    for (std::size_t s = 0; s < n; ++s) order[s] = s;
    if (workload_.timed()) {
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return workload_.arrival_s(a) < workload_.arrival_s(b);
      });
    }
    for (std::size_t s : order) {
      if (requests >= limit_) break;
      requests += workload_.turns(s);
      ++sessions;
    }
    order.resize(sessions);
    if (workload_.timed()) {
      double scale = 1;
      const double span =
          sessions < 2 ? 0 : workload_.arrival_s(order.back()) - workload_.arrival_s(order.front());
      if (config_.request_rate > 0 && span > 0) {
        scale = (static_cast<double>(requests) / span) / config_.request_rate;
      }
      const double t0 = sessions == 0 ? 0 : workload_.arrival_s(order.front());
      for (std::size_t s : order) start[s] = (workload_.arrival_s(s) - t0) * scale;
    } else if (config_.request_rate > 0) {
      const double session_rate = config_.request_rate * static_cast<double>(sessions) /
                                  static_cast<double>(std::max<std::size_t>(1, requests));
      Rng rng(config_.seed);
      double t = 0;
      for (std::size_t s : order) {
        start[s] = t;
        t += rng.exponential(1.0 / session_rate);
      }
    }
    for (std::size_t s : order) push(start[s], EventKind::kArrival, static_cast<std::uint32_t>(s));
  }

  Status arrive(std::uint32_t session, std::uint32_t turn) {
    if (sent_ >= limit_) return {};
    auto prepared = workload_.prepare(session, turn);
    if (!prepared) return prepared.error();
    const auto g =
        static_cast<std::uint32_t>(gateways_.size() == 1 ? 0 : spray_.below(gateways_.size()));
    SimGateway& gw = gateways_[g];
    gateway::RouteRequest request;
    request.block_hashes = prepared->block_hashes;
    request.prompt_tokens = prepared->tokens.size();
    request.block_size = workload_.block_size();
    const Clock::time_point now = virtual_time(now_);
    gateway::RouteDecision d = gw.policy->route(request, gw.views, gw.index, now);
    if (d.reason == gateway::RouteReason::kNoHealthyReplica) {
      return make_error(ErrorCode::kInternal, "simulate: no replica to route to");
    }
    d.predicted_from =
        gateway::record_routed(gw.index, *gw.policy, gw.views[d.replica], request, d, now);
    const auto id = static_cast<std::uint32_t>(flights_.size());
    if (peered()) {
      gw.peer_out.routed(id, d.replica, request, d);
      flush_peers(g);
    }

    Flight& f = flights_.emplace_back();
    f.session = session;
    f.turn = turn;
    f.gateway = g;
    f.replica = d.replica;
    f.decision = d;
    f.uncached = gateway::uncached_prompt_tokens(request, d);
    f.block_hashes = std::move(prepared->block_hashes);
    f.arrival = now_;
    f.measured = sent_++ >= config_.warmup;
    if (f.measured) {
      ++per_replica_[d.replica];
      ++route_reasons_[gateway::route_reason_name(d.reason)];
    }
    SimReplica& replica = *replicas_[d.replica];
    replica.submit(id, std::move(prepared->tokens), prepared->max_tokens);
    if (!replica.stepping()) start_step(d.replica);
    ensure_tick(d.replica);
    return {};
  }

  void start_step(std::uint32_t r) {
    SimReplica& replica = *replicas_[r];
    if (const std::optional<double> seconds = replica.start_step()) {
      for (std::uint64_t id : replica.step_sequences()) {
        if (flights_[id].admitted < 0) flights_[id].admitted = now_;
      }
      push(now_ + *seconds, EventKind::kStepEnd, r);
      return;
    }
    // Nothing to run: only requests the engine refused (too long to ever fit) come out.
    for (const engine::SequenceUpdate& u : replica.end_step()) update(u);
  }

  void step_end(std::uint32_t r) {
    SimReplica& replica = *replicas_[r];
    const std::vector<engine::SequenceUpdate> updates = replica.end_step();
    std::vector<engine::CacheEvent> events = replica.drain_events();
    if (!events.empty()) {
      Delivery d;
      d.t = now_ + config_.event_delay_s;
      d.replica = r;
      d.changes.reserve(events.size());
      for (const engine::CacheEvent& e : events) d.changes.push_back({e.block_hash, e.kind});
      deliveries_.push_back(std::move(d));
    }
    for (const engine::SequenceUpdate& u : updates) update(u);
    start_step(r);
    ensure_tick(r);
  }

  // What the gateway sees of a sequence's progress: its first token (prefill done), its tokens,
  // its end. A request that ends without a token was refused (an HTTP 400 from the engine).
  void update(const engine::SequenceUpdate& u) {
    Flight& f = flights_[u.id];
    SimGateway& gw = gateways_[f.gateway];
    gateway::ReplicaView& view = gw.views[f.replica];
    if (u.has_token) {
      if (f.first < 0) {
        f.first = now_;
        f.prompt_tokens = u.prompt_tokens;
        f.cached_tokens = u.cached_tokens;
        gateway::record_prefilled(gw.index, view, routed(f), f.uncached, virtual_time(now_),
                                  f.decision.predicted_from);
        f.block_hashes = {};  // settled
        if (peered()) {
          gw.peer_out.prefilled(u.id);
          flush_peers(f.gateway);
        }
      } else if (f.measured) {
        itl_.add(now_ - f.last);
      }
      f.last = now_;
      ++f.tokens;
    }
    if (u.finished == engine::FinishReason::kNone) return;
    gateway::record_finished(gw.index, *gw.policy, view, routed(f), f.decision, f.first >= 0,
                             f.first < 0 ? f.uncached : 0, virtual_time(now_));
    f.block_hashes = {};
    if (peered()) {
      gw.peer_out.finished(u.id);
      flush_peers(f.gateway);
    }
    ++finished_;
    if (f.first < 0) return;  // refused: a conversation cannot go on without its answer
    if (f.turn + 1 < workload_.turns(f.session)) {
      push(now_ + workload_.think_time_s(f.session, f.turn + 1), EventKind::kArrival, f.session,
           f.turn + 1);
    }
  }

  // prefixgate-engine writes a "load" line every load_report_interval. A replica that has been
  // idle since its last line says nothing new, so its ticks stop until it has work again (and
  // resume on its own cadence).
  void ensure_tick(std::uint32_t r) {
    if (ticking_[r]) return;
    const double interval = config_.load_report_interval_s;
    double t = next_tick_[r];
    if (t < now_) t += std::ceil((now_ - t) / interval) * interval;
    ticking_[r] = true;
    push(t, EventKind::kLoadTick, r);
  }

  void load_tick(std::uint32_t r) {
    SimReplica& replica = *replicas_[r];
    Delivery d;
    d.t = now_ + config_.event_delay_s;
    d.replica = r;
    d.has_load = true;
    d.load = replica.load_report();
    deliveries_.push_back(std::move(d));
    next_tick_[r] = now_ + config_.load_report_interval_s;
    if (replica.busy()) {
      push(next_tick_[r], EventKind::kLoadTick, r);
    } else {
      ticking_[r] = false;
    }
  }

  void deliver(const Delivery& d) {
    // The replica's events as runs between its clears, built once for every gateway, each of
    // which applies them as the gateway's replica set does (apply_changes).
    key_changes_.clear();
    clears_at_.clear();
    for (const KvChange& c : d.changes) {
      switch (c.kind) {
        case engine::CacheEvent::Kind::kStored:
          key_changes_.push_back({c.hash, gateway::KeyState::kPrimary});
          break;
        case engine::CacheEvent::Kind::kRemoved:
          key_changes_.push_back({c.hash, gateway::KeyState::kAbsent});
          break;
        case engine::CacheEvent::Kind::kCleared: clears_at_.push_back(key_changes_.size()); break;
      }
    }
    const std::span<const gateway::KeyChange> changes = key_changes_;
    for (SimGateway& gw : gateways_) {
      std::size_t from = 0;
      for (const std::size_t at : clears_at_) {
        gw.index.apply_changes(d.replica, changes.subspan(from, at - from));
        gw.index.apply_cleared(d.replica);
        from = at;
      }
      gw.index.apply_changes(d.replica, changes.subspan(from));
      if (d.has_load) gateway::apply_load_report(gw.views[d.replica], d.load, virtual_time(now_));
    }
    kv_events_ += d.changes.size() * gateways_.size();
    events_ += d.changes.size() * gateways_.size() + (d.has_load ? gateways_.size() : 0);
  }

  void print_progress(std::chrono::steady_clock::time_point wall0) const {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    std::cerr << "\rsimulate " << config_.policy << " x" << config_.replicas << ": " << finished_
              << "/" << limit_ << " requests, " << static_cast<long>(now_) << " s modelled, "
              << static_cast<long>(wall) << " s wall   " << std::flush;
  }

  SimResult results(double wall_s) const {
    SimResult r;
    r.replicas = config_.replicas;
    r.gateways = config_.gateways;
    r.peer_delay_s = peered() ? config_.peer_delay_s : -1;
    r.policy = config_.policy;
    r.offered_rps = config_.request_rate;
    std::vector<double> ttft, e2e, queue;
    double first_arrival = INFINITY, last_done = 0;
    double run_start = INFINITY, run_end = 0;
    std::size_t completed = 0;
    for (const Flight& f : flights_) {
      run_start = std::min(run_start, f.arrival);
      run_end = std::max(run_end, std::max(f.arrival, f.last));
      if (!f.measured) continue;
      ++r.requests;
      if (f.first < 0) {
        ++r.errors;
        continue;
      }
      ++completed;
      r.prompt_tokens += f.prompt_tokens;
      r.cached_tokens += f.cached_tokens;
      r.output_tokens += f.tokens;
      ttft.push_back(f.first - f.arrival);
      e2e.push_back(f.last - f.arrival);
      queue.push_back(f.admitted - f.arrival);
      first_arrival = std::min(first_arrival, f.arrival);
      last_done = std::max(last_done, f.last);
    }
    r.hit_rate = r.prompt_tokens == 0
                     ? 0
                     : static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens);
    r.ttft_s = summarize_sample(std::move(ttft));
    r.e2e_s = summarize_sample(std::move(e2e));
    r.queue_s = summarize_sample(std::move(queue));
    r.itl_s = itl_.summary();
    std::size_t max_count = 0, total = 0;
    for (std::size_t c : per_replica_) {
      max_count = std::max(max_count, c);
      total += c;
    }
    r.imbalance = total == 0
                      ? 0
                      : static_cast<double>(max_count) * static_cast<double>(config_.replicas) /
                            static_cast<double>(total);
    for (const auto& replica : replicas_) {
      r.preemptions += replica->preemptions();
      r.gpu_seconds += replica->gpu_seconds();
      r.steps += replica->steps();
    }
    r.makespan_s = run_end > run_start ? run_end - run_start : 0;
    if (completed > 0 && last_done > first_arrival) {
      r.throughput_rps = static_cast<double>(completed) / (last_done - first_arrival);
      r.output_tps = static_cast<double>(r.output_tokens) / (last_done - first_arrival);
    }
    r.route_reasons = route_reasons_;
    r.events = events_;
    r.kv_events = kv_events_;
    r.wall_s = wall_s;
    return r;
  }

  static Summary summarize_sample(std::vector<double> v) { return bench::summarize(std::move(v)); }

  const SimWorkload& workload_;
  const SimConfig& config_;
  Rng spray_;
  std::vector<SimGateway> gateways_;
  std::vector<std::unique_ptr<SimReplica>> replicas_;
  std::vector<Flight> flights_;
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::deque<Delivery> deliveries_;
  std::deque<PeerDelivery> peer_deliveries_;
  // deliver()'s scratch: a delivery's stored and removed blocks, and where its clears fall.
  std::vector<gateway::KeyChange> key_changes_;
  std::vector<std::size_t> clears_at_;
  std::vector<bool> ticking_;
  std::vector<double> next_tick_;
  std::vector<std::size_t> per_replica_;
  std::map<std::string, std::size_t> route_reasons_;
  GapHistogram itl_;
  double now_ = 0;
  std::uint64_t seq_ = 0;
  std::size_t limit_ = 0;
  std::size_t sent_ = 0;
  std::size_t finished_ = 0;
  std::uint64_t events_ = 0;
  std::uint64_t kv_events_ = 0;
};

}  // namespace

Result<SimResult> run_simulation(const SimWorkload& workload, const SimConfig& config) {
  if (config.replicas == 0 || config.gateways == 0) {
    return make_error(ErrorCode::kInvalidValue, "simulate: at least one replica and one gateway");
  }
  Simulation sim(workload, config);
  return sim.run();
}

}  // namespace prefixgate::bench
