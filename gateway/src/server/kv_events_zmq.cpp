// KvEventFollowers: every socket is created in start() and used, then closed, by the thread
// only. stop() shuts the ZeroMQ context down, which makes the thread's zmq_poll fail with ETERM
// at once; the thread closes its sockets and ends, and the context is terminated after the join.
#include "server/kv_events_zmq.h"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "prefixgate/base/check.h"
#include "prefixgate/gateway/kv_event_stream.h"
#include "prefixgate/gateway/replica_keys.h"
#include "prefixgate/kv_events/wire.h"
#include "prefixgate/kv_events/zmq_frames.h"

namespace prefixgate::gateway::server {
namespace {

using Steady = std::chrono::steady_clock;

// Messages read from one socket before the others get a turn.
constexpr int kMaxMessagesPerTurn = 256;
constexpr int kReceiveHwm = 100000;  // batches a SUB queues while its stream is replaying

class Socket {
 public:
  Socket() = default;
  explicit Socket(void* s) : s_(s) {}
  Socket(Socket&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      close();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  ~Socket() { close(); }
  void* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }
  void close() {
    if (s_ != nullptr) zmq_close(std::exchange(s_, nullptr));
  }

 private:
  void* s_ = nullptr;
};

void set_int(void* s, int option, int value) {
  zmq_setsockopt(s, option, &value, sizeof value);
}

using kv_events::recv_frames;

struct Rank {
  ReplicaId replica = 0;
  std::size_t index = 0;  // the data-parallel rank
  std::string endpoint, replay_endpoint;
  Socket sub, dealer, monitor;
  std::unique_ptr<KvEventStream> stream;
  bool connected = false;
  bool ever_connected = false;
  Steady::time_point replay_deadline{};
  KvStreamStats reported;
  BlockKeysSkips reported_skips;
};

struct Replica {
  ReplicaId id = 0;
  std::string name;
  std::unique_ptr<ReplicaKeys> keys;
  std::vector<std::size_t> ranks;  // indexes into Impl::ranks
  std::uint64_t epoch = 0;
  bool link_up = false;
};

}  // namespace

struct KvEventFollowers::Impl {
  GatewayContext& ctx;
  KvEventFollowerOptions options;
  void* zctx = nullptr;
  std::vector<Rank> ranks;
  std::vector<Replica> replicas;
  std::thread thread;
  std::once_flag stopped;
  // The thread's scratch.
  std::vector<KeyChange> rank_changes, replica_changes;

  Impl(GatewayContext& c, KvEventFollowerOptions o) : ctx(c), options(o) {}
  ~Impl() {
    ranks.clear();  // closes the sockets the thread never took over (a failed start)
    if (zctx != nullptr) zmq_ctx_term(zctx);
  }

  Result<Socket> socket(int type) {
    Socket s(zmq_socket(zctx, type));
    if (!s) {
      return make_error(ErrorCode::kInternal,
                        std::string("kv events: ZeroMQ socket: ") + zmq_strerror(zmq_errno()));
    }
    set_int(s.get(), ZMQ_LINGER, 0);
    set_int(s.get(), ZMQ_RECONNECT_IVL, 100);
    set_int(s.get(), ZMQ_RECONNECT_IVL_MAX, 2000);
    return s;
  }

  Status connect(Socket& s, const std::string& endpoint) {
    if (zmq_connect(s.get(), endpoint.c_str()) != 0) {
      return make_error(ErrorCode::kInvalidValue, "kv events: cannot connect to '" + endpoint +
                                                      "': " + zmq_strerror(zmq_errno()));
    }
    return {};
  }

  Status open_dealer(Rank& r) {
    auto dealer = socket(ZMQ_DEALER);
    if (!dealer) return dealer.error();
    r.dealer = std::move(*dealer);
    return connect(r.dealer, r.replay_endpoint);
  }

  Status open_rank(Rank& r, std::size_t serial) {
    auto sub = socket(ZMQ_SUB);
    if (!sub) return sub.error();
    r.sub = std::move(*sub);
    zmq_setsockopt(r.sub.get(), ZMQ_SUBSCRIBE, "", 0);  // every topic
    set_int(r.sub.get(), ZMQ_RCVHWM, kReceiveHwm);
    // Heartbeats notice an engine host that vanished without closing the connection.
    set_int(r.sub.get(), ZMQ_HEARTBEAT_IVL, 1000);
    set_int(r.sub.get(), ZMQ_HEARTBEAT_TIMEOUT, 5000);
    const std::string monitor_endpoint = "inproc://prefixgate-kv-events-" + std::to_string(serial);
    if (zmq_socket_monitor(r.sub.get(), monitor_endpoint.c_str(),
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0) {
      return make_error(ErrorCode::kInternal,
                        std::string("kv events: socket monitor: ") + zmq_strerror(zmq_errno()));
    }
    auto monitor = socket(ZMQ_PAIR);
    if (!monitor) return monitor.error();
    r.monitor = std::move(*monitor);
    if (Status s = connect(r.monitor, monitor_endpoint); !s) return s;
    if (Status s = connect(r.sub, r.endpoint); !s) return s;
    if (!r.replay_endpoint.empty()) return open_dealer(r);
    return {};
  }

  Status open() {
    zctx = zmq_ctx_new();
    if (zctx == nullptr) {
      return make_error(ErrorCode::kInternal, "kv events: cannot create a ZeroMQ context");
    }
    for (ReplicaId id = 0; id < ctx.config.upstreams.size(); ++id) {
      const UpstreamConfig& up = ctx.config.upstreams[id];
      if (!has_kv_event_stream(up.kind)) continue;
      const canon::PromptModel& model = ctx.models->for_model(up.model).prompt_model;
      Replica rep;
      rep.id = id;
      rep.name = up.url;
      rep.keys = std::make_unique<ReplicaKeys>(up.data_parallel_size);
      for (std::size_t k = 0; k < up.data_parallel_size; ++k) {
        Rank r;
        r.replica = id;
        r.index = k;
        r.endpoint = kv_events::endpoint_for_rank(up.kv_events, k).value_or(up.kv_events);
        if (!up.kv_events_replay.empty()) {
          r.replay_endpoint =
              kv_events::endpoint_for_rank(up.kv_events_replay, k).value_or(up.kv_events_replay);
        }
        r.stream = std::make_unique<KvEventStream>(
            BlockKeysConfig{.model_id = model.model_id, .block_size = model.block_size},
            KvStreamOptions{.replay = !r.replay_endpoint.empty()});
        if (Status s = open_rank(r, ranks.size()); !s) return s;
        rep.ranks.push_back(ranks.size());
        ranks.push_back(std::move(r));
        spdlog::info("kv events {}: rank {} subscribing to {}{}", up.url, k, ranks.back().endpoint,
                     ranks.back().replay_endpoint.empty()
                         ? std::string(" (no replay)")
                         : " (replay " + ranks.back().replay_endpoint + ")");
      }
      // Series at zero from the start, so their absence never reads as "no gaps".
      for (const char* outcome : {"replayed", "lost"})
        ctx.m.kv_event_gaps->add({up.url, outcome}, 0);
      ctx.m.kv_event_replays->add({up.url}, 0);
      ctx.m.kv_event_resets->add({up.url}, 0);
      replicas.push_back(std::move(rep));
    }
    return {};
  }

  Replica& replica_of(const Rank& r) {
    for (Replica& rep : replicas) {
      if (rep.id == r.replica) return rep;
    }
    PG_CHECK(false, "a rank without its replica");
    return replicas.front();
  }

  void request_replay(Rank& r, std::int64_t from) {
    const std::string seq = kv_events::encode_sequence(from);
    // [empty delimiter, start]: the ROUTER answers a REQ-shaped request.
    const bool sent = zmq_send(r.dealer.get(), "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                      zmq_send(r.dealer.get(), seq.data(), seq.size(), ZMQ_DONTWAIT) >= 0;
    if (!sent) {
      r.stream->replay_done(rank_changes);  // nothing will come: what it should fill is lost
      return;
    }
    r.replay_deadline = Steady::now() + options.replay_timeout;
  }

  void skip(const Rank& r, const char* reason, double n = 1) {
    if (n > 0) ctx.m.kv_event_skipped->add({replica_of(r).name, reason}, n);
  }

  void on_sub(Rank& r) {
    for (int i = 0; i < kMaxMessagesPerTurn && !r.stream->replaying(); ++i) {
      std::vector<std::string> frames = recv_frames(r.sub.get());
      if (frames.empty()) break;
      const auto seq = frames.size() == 3 ? kv_events::decode_sequence(frames[1]) : std::nullopt;
      if (!seq) {
        skip(r, "malformed_frame");
        continue;
      }
      if (auto from = r.stream->live(*seq, frames[2], rank_changes)) request_replay(r, *from);
    }
  }

  void on_dealer(Rank& r) {
    for (int i = 0; i < kMaxMessagesPerTurn; ++i) {
      std::vector<std::string> frames = recv_frames(r.dealer.get());
      if (frames.empty()) break;
      // [empty delimiter, sequence, payload] (the ROUTER's identity frame is stripped).
      const auto seq = frames.size() == 3 && frames[0].empty()
                           ? kv_events::decode_sequence(frames[1])
                           : std::nullopt;
      if (!seq) {
        skip(r, "malformed_frame");
        continue;
      }
      if (!r.stream->replaying()) continue;  // a late answer to a replay already given up
      if (*seq == kv_events::kEndOfReplay) {
        r.stream->replay_done(rank_changes);
        continue;
      }
      r.stream->replayed(*seq, frames[2], rank_changes);
      r.replay_deadline = Steady::now() + options.replay_timeout;
    }
  }

  void on_monitor(Rank& r) {
    for (;;) {
      std::vector<std::string> frames = recv_frames(r.monitor.get());
      if (frames.empty()) return;
      if (frames[0].size() < 2) continue;
      std::uint16_t event = 0;
      std::memcpy(&event, frames[0].data(), sizeof event);
      const Replica& rep = replica_of(r);
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && !r.connected) {
        r.connected = true;
        spdlog::info("kv events {}: rank {} connected to {}", rep.name, r.index, r.endpoint);
        const bool first = !r.ever_connected;
        r.ever_connected = true;
        if (!r.stream->replaying()) {
          if (auto from = first ? r.stream->start() : r.stream->reconnected()) {
            request_replay(r, *from);
          }
        }
      } else if (event == ZMQ_EVENT_DISCONNECTED && r.connected) {
        r.connected = false;
        spdlog::warn("kv events {}: rank {} lost {}; routing on predictions until it is back",
                     rep.name, r.index, r.endpoint);
      }
    }
  }

  // Hands a rank's key changes to the index and its counts to the metrics.
  void publish(Rank& r, bool applied_something) {
    Replica& rep = replica_of(r);
    replica_changes.clear();
    rep.keys->apply(r.index, rank_changes, replica_changes);
    rank_changes.clear();
    if (applied_something || !replica_changes.empty()) {
      const std::uint64_t epoch = ctx.replicas->apply_key_changes(rep.id, replica_changes);
      if (epoch != rep.epoch) {
        // The index forgot this replica (a failed health check): teach it again.
        rep.epoch = epoch;
        const std::vector<KeyChange> held = rep.keys->held();
        ctx.replicas->apply_key_changes(rep.id, held);
      }
    }
    const KvStreamStats& s = r.stream->stats();
    const KvStreamStats& was = r.reported;
    const auto delta = [](std::uint64_t now, std::uint64_t before) {
      return static_cast<double>(now - before);
    };
    const std::string& name = rep.name;
    if (s.stored_events != was.stored_events) {
      ctx.m.kv_events->add({name, "stored"}, delta(s.stored_events, was.stored_events));
    }
    if (s.removed_events != was.removed_events) {
      ctx.m.kv_events->add({name, "removed"}, delta(s.removed_events, was.removed_events));
    }
    if (s.cleared_events != was.cleared_events) {
      ctx.m.kv_events->add({name, "cleared"}, delta(s.cleared_events, was.cleared_events));
    }
    if (s.gaps_replayed != was.gaps_replayed) {
      ctx.m.kv_event_gaps->add({name, "replayed"}, delta(s.gaps_replayed, was.gaps_replayed));
    }
    if (s.gaps_lost != was.gaps_lost) {
      ctx.m.kv_event_gaps->add({name, "lost"}, delta(s.gaps_lost, was.gaps_lost));
      spdlog::warn(
          "kv events {}: rank {}: events lost; its blocks count as unknown until stored "
          "again",
          name, r.index);
    }
    if (s.replays != was.replays)
      ctx.m.kv_event_replays->add({name}, delta(s.replays, was.replays));
    if (s.resets != was.resets) {
      ctx.m.kv_event_resets->add({name}, delta(s.resets, was.resets));
      spdlog::warn(
          "kv events {}: rank {} restarted (sequence numbers began again): forgot its "
          "blocks",
          name, r.index);
    }
    skip(r, "malformed_payload", delta(s.malformed_payloads, was.malformed_payloads));
    skip(r, "unknown_event", delta(s.unknown_events, was.unknown_events));
    const BlockKeysSkips& k = r.stream->keys().skips();
    const BlockKeysSkips& kw = r.reported_skips;
    skip(r, "unknown_parent", delta(k.unknown_parent, kw.unknown_parent));
    skip(r, "lora", delta(k.lora, kw.lora));
    skip(r, "other_group", delta(k.other_group, kw.other_group));
    skip(r, "bad_tokens", delta(k.bad_tokens, kw.bad_tokens));
    r.reported = s;
    r.reported_skips = k;
  }

  void update_links() {
    for (Replica& rep : replicas) {
      bool up = true;
      for (std::size_t i : rep.ranks) up = up && ranks[i].connected;
      if (up == rep.link_up) continue;
      rep.link_up = up;
      ctx.replicas->set_events_link(rep.id, up);
    }
  }

  void run() {
    std::vector<zmq_pollitem_t> items;
    std::vector<std::pair<std::size_t, int>> owners;  // (rank, 0 sub | 1 dealer | 2 monitor)
    for (;;) {
      items.clear();
      owners.clear();
      auto timeout = options.poll_interval;
      const auto now = Steady::now();
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        Rank& r = ranks[i];
        items.push_back({r.monitor.get(), 0, ZMQ_POLLIN, 0});
        owners.emplace_back(i, 2);
        if (r.stream->replaying()) {
          items.push_back({r.dealer.get(), 0, ZMQ_POLLIN, 0});
          owners.emplace_back(i, 1);
          timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::max(r.replay_deadline - now, Steady::duration(0))));
        } else {
          items.push_back({r.sub.get(), 0, ZMQ_POLLIN, 0});
          owners.emplace_back(i, 0);
        }
      }
      const int n = zmq_poll(items.data(), static_cast<int>(items.size()),
                             static_cast<long>(timeout.count()));
      if (n < 0) {
        if (zmq_errno() == ETERM) break;  // stop()
        continue;                         // EINTR
      }
      // rank_changes is one buffer for every rank: each handler's changes go to its own
      // replica (publish) before the next handler, maybe another rank's, adds to it.
      for (std::size_t k = 0; k < items.size(); ++k) {
        if ((items[k].revents & ZMQ_POLLIN) == 0) continue;
        Rank& r = ranks[owners[k].first];
        switch (owners[k].second) {
          case 0: on_sub(r); break;
          case 1: on_dealer(r); break;
          default: on_monitor(r); break;
        }
        publish(r, /*applied_something=*/owners[k].second != 2);
      }
      const auto after = Steady::now();
      for (Rank& r : ranks) {
        if (r.stream->replaying() && after >= r.replay_deadline) {
          spdlog::warn("kv events {}: rank {}: no replay from {} within {} ms", replica_of(r).name,
                       r.index, r.replay_endpoint, options.replay_timeout.count());
          r.stream->replay_done(rank_changes);
          // A fresh socket: a late answer to this request must not mix into the next replay.
          if (Status s = open_dealer(r); !s) spdlog::error("{}", s.error().message);
          publish(r, true);
        }
      }
      update_links();
    }
    for (Rank& r : ranks) {
      r.monitor.close();
      r.dealer.close();
      r.sub.close();
    }
  }
};

KvEventFollowers::KvEventFollowers(GatewayContext& ctx, KvEventFollowerOptions options)
    : impl_(std::make_unique<Impl>(ctx, options)) {}

KvEventFollowers::~KvEventFollowers() {
  stop();
}

Status KvEventFollowers::start() {
  if (Status s = impl_->open(); !s) return s;
  if (impl_->ranks.empty()) return {};
  Impl* impl = impl_.get();
  impl_->thread = std::thread([impl] { impl->run(); });
  return {};
}

void KvEventFollowers::stop() {
  std::call_once(impl_->stopped, [this] {
    if (impl_->zctx != nullptr) zmq_ctx_shutdown(impl_->zctx);
    if (impl_->thread.joinable()) impl_->thread.join();
  });
}

}  // namespace prefixgate::gateway::server
