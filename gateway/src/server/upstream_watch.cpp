// Background loops per replica: the active health check; for prefixgate upstreams the
// /v1/kv_events subscription that keeps the prefix index and the load view current; for vllm and
// sglang upstreams the read of their Prometheus /metrics for the load view (their cache events
// come over ZeroMQ: kv_events_zmq.cpp).
//
// kv_events: a snapshot replaces what the index knows of the replica; stored/removed/cleared
// are applied in sequence order; a reconnect resumes with ?since=SEQ (the engine replays the
// missed deltas or sends a fresh snapshot); a gap in sequence numbers drops the connection and
// starts over from a fresh snapshot. So does an ejection while the stream stays up (a replica
// that hung for a while, then resumed): the index forgot the replica's blocks (its epoch
// changed), and only a snapshot brings back those it still holds.
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "server/engine_events.h"
#include "server/engine_load.h"
#include "server/upstream_exchange.h"
#include "server/upstream_pool.h"

namespace prefixgate::gateway::server {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(kTuple);
}

// Follows one replica's /v1/kv_events stream: lines are applied in order, the stored and removed
// blocks of one read in one batch (one lock of the replica set and one metrics update for all of
// them instead of one per block: an engine sends a line per run of blocks it stores or evicts,
// or per block).
class EventFollower {
 public:
  EventFollower(GatewayContext& ctx, ReplicaId r)
      : ctx_(ctx), r_(r), name_(ctx.replicas->upstream(r).url) {}

  bool have_seq() const { return have_seq_; }
  std::uint64_t last_seq() const { return last_seq_; }
  void forget_seq() { have_seq_ = false; }
  // The index forgot the replica since the last snapshot: the deltas after last_seq would not
  // bring back what it still holds.
  bool forgotten() const { return have_seq_ && ctx_.replicas->index_epoch(r_) != epoch_; }

  // Applies one line. Returns false on a sequence gap (start over from a fresh snapshot).
  bool apply(std::string_view line) {
    using Kind = EngineEventLine::Kind;
    const EngineEventLine e = parse_engine_event_line(line);
    if (e.kind == Kind::kSkip) return true;  // not ours to judge: skip it
    if (e.kind == Kind::kLoad) {
      ctx_.replicas->apply_load(r_, e.load);
      return true;
    }
    if (e.kind == Kind::kStored || e.kind == Kind::kRemoved) {
      if (e.blocks == 0) return true;  // an empty run: no block, no place in the sequence
      if (!in_sequence(e.seq, e.blocks)) return false;
      (e.kind == Kind::kStored ? stored_blocks_ : removed_blocks_) += static_cast<double>(e.blocks);
      const KeyState state = e.kind == Kind::kStored ? KeyState::kPrimary : KeyState::kAbsent;
      if (e.hash) batch_.push_back({*e.hash, state});
      for (const std::uint64_t h : e.hashes) batch_.push_back({h, state});
      return true;
    }
    flush();  // what comes next applies after the blocks before it
    ctx_.m.kv_events->add({name_, e.type});
    if (e.kind == Kind::kSnapshot) {
      epoch_ = ctx_.replicas->apply_snapshot(r_, e.hashes);
      last_seq_ = e.seq;
      have_seq_ = true;
      return true;
    }
    if (!in_sequence(e.seq, 1)) return false;
    if (e.kind == Kind::kCleared) ctx_.replicas->apply_cleared(r_);
    return true;
  }

  // Applies the blocks batched so far.
  void flush() {
    if (!batch_.empty()) ctx_.replicas->apply_key_changes(r_, batch_);
    batch_.clear();
    if (stored_blocks_ > 0) ctx_.m.kv_events->add({name_, "stored"}, stored_blocks_);
    if (removed_blocks_ > 0) ctx_.m.kv_events->add({name_, "removed"}, removed_blocks_);
    stored_blocks_ = removed_blocks_ = 0;
  }

 private:
  // Whether a line of `count` events from `seq` on follows the last one applied.
  bool in_sequence(std::uint64_t seq, std::size_t count) {
    if (!have_seq_ || seq != last_seq_ + 1) {
      spdlog::warn("kv_events {}: sequence gap ({} after {}); resyncing", name_, seq, last_seq_);
      have_seq_ = false;
      return false;
    }
    last_seq_ = seq + (count - 1);
    return true;
  }

  GatewayContext& ctx_;
  const ReplicaId r_;
  const std::string& name_;
  std::uint64_t last_seq_ = 0;
  bool have_seq_ = false;
  std::uint64_t epoch_ = 0;  // the replica's index epoch as of the last snapshot applied
  std::vector<KeyChange> batch_;
  double stored_blocks_ = 0;  // events counted per block, one line or a run
  double removed_blocks_ = 0;
};

}  // namespace

Awaitable<void> run_kv_events(GatewayContext& ctx, ReplicaId r) {
  EventFollower follower(ctx, r);
  const std::string& name = ctx.replicas->upstream(r).url;
  while (!ctx.draining()) {
    if (follower.forgotten()) follower.forget_seq();
    {
      Exchange ex(ctx, r);
      // batch=1: runs of blocks on one line each (an engine that predates it ignores it).
      Request req{http::verb::get,
                  follower.have_seq()
                      ? "/v1/kv_events?batch=1&since=" + std::to_string(follower.last_seq())
                      : "/v1/kv_events?batch=1",
                  11};
      req.set(http::field::user_agent, "prefixgate");
      const UpstreamFailure f = co_await ex.open(req);
      if (f == UpstreamFailure::kNone && ex.answer().result() == http::status::ok) {
        spdlog::debug("kv_events {}: subscribed", name);
        ctx.replicas->set_events_link(r, true);
        std::string pending;
        bool ok = true;
        while (ok && !ctx.draining() && !ex.done()) {
          const bool read = co_await ex.read_some(pending);
          if (!read) break;
          std::size_t pos = 0;
          for (std::size_t nl; ok && (nl = pending.find('\n', pos)) != std::string::npos;
               pos = nl + 1) {
            ok = follower.apply(std::string_view(pending).substr(pos, nl - pos));
          }
          follower.flush();
          pending.erase(0, pos);
          // (Load lines come at least every load_report_interval, so this is checked often.)
          if (ok && follower.forgotten()) {
            spdlog::info("kv_events {}: the index forgot the replica; resubscribing for a snapshot",
                         name);
            follower.forget_seq();
            break;
          }
        }
        ctx.replicas->set_events_link(r, false);
      }
    }
    if (ctx.draining()) break;
    co_await sleep_for(std::chrono::milliseconds(200));
  }
}

Awaitable<void> run_load_scrape(GatewayContext& ctx, ReplicaId r) {
  const UpstreamConfig& up = ctx.config.upstreams[r];
  bool warned = false;
  while (!ctx.draining()) {
    std::string problem;
    {
      Exchange ex(ctx, r);
      ex.set_first_byte_timeout(std::max(up.load_interval * 5, std::chrono::milliseconds(1000)));
      Request req{http::verb::get, "/metrics", 11};
      req.set(http::field::user_agent, "prefixgate");
      const UpstreamFailure f = co_await ex.open(req);
      if (f != UpstreamFailure::kNone) {
        problem = std::string("GET /metrics: ") + upstream_failure_name(f);
      } else {
        std::string body;
        const bool read = co_await ex.read_all(body, 16u << 20);
        ex.finish();
        if (!read || ex.answer().result() != http::status::ok) {
          problem = "GET /metrics: status " + std::to_string(ex.answer().result_int());
        } else if (auto load = parse_engine_load(body, up.kind); load) {
          ctx.replicas->apply_load(r, *load);
        } else {
          problem = load.error().message;
        }
      }
    }
    if (!problem.empty()) {
      ctx.m.load_scrape_failures->add({up.url});
      if (!warned) spdlog::warn("upstream {}: no load from /metrics ({})", up.url, problem);
      warned = true;
    } else {
      warned = false;
    }
    co_await sleep_for(up.load_interval);
  }
}

Awaitable<void> run_health_checks(GatewayContext& ctx, ReplicaId r) {
  const std::string& name = ctx.replicas->upstream(r).url;
  bool was_healthy = false;
  while (!ctx.draining()) {
    bool ok = false;
    {
      Exchange ex(ctx, r);
      ex.set_first_byte_timeout(
          std::max(ctx.config.timeouts.health_interval, std::chrono::milliseconds(1000)));
      Request req{http::verb::get, "/health", 11};
      req.set(http::field::user_agent, "prefixgate");
      const UpstreamFailure f = co_await ex.open(req);
      if (f == UpstreamFailure::kNone) {
        std::string body;
        // (No co_await inside && or ?: : GCC 12 miscompiles them.)
        const bool read = co_await ex.read_all(body, 1 << 16);
        ok = read && ex.answer().result() == http::status::ok;
        ex.finish();
      }
    }
    ctx.replicas->health_check_result(r, ok);
    if (ok != was_healthy) {
      if (ok) {
        spdlog::info("upstream {} is healthy", name);
      } else {
        spdlog::warn("upstream {} failed its health check: ejected", name);
        ctx.pool->clear(r);
      }
      was_healthy = ok;
    }
    co_await sleep_for(ctx.config.timeouts.health_interval);
  }
}

}  // namespace prefixgate::gateway::server
