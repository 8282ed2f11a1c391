// What the Beast translation units of the gateway share: stream and message types, the
// gateway-wide context every connection sees, and the metric families the proxy records.
#pragma once

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "prefixgate/base/status.h"
#include "prefixgate/serving/errors.h"
#include "prefixgate/serving/http.h"
#include "prefixgate/serving/metrics.h"
#include "prefixgate/serving/server.h"
#include "prefixgate/serving/socket_deadline.h"
#include "server/admin_gate.h"
#include "server/admission_control.h"
#include "server/canonicalize_stage.h"
#include "server/live_stats.h"
#include "server/model_registry.h"
#include "server/proxy_metrics.h"
#include "server/replica_set.h"
#include "server/request_prep.h"

namespace prefixgate::gateway::server {

namespace asio = serving::asio;
namespace beast = serving::beast;
namespace http = serving::http;
using serving::Awaitable;
using serving::Request;
using serving::Response;
using tcp = serving::tcp;
using SteadyClock = std::chrono::steady_clock;

class UpstreamPool;

// Lets through at most `per_second` events per second (a fixed one-second window); for log
// sampling, where a burst at a window's edge is harmless.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(std::size_t per_second = 0) : per_second_(per_second) {}
  void set_rate(std::size_t per_second) { per_second_ = per_second; }
  bool allow(Clock::time_point now) {
    // Once a window's budget is spent the answer is no until the window ends: given without
    // the lock, which every request with a finding would otherwise take once per finding.
    if (now.time_since_epoch().count() < spent_until_.load(std::memory_order_relaxed)) {
      return false;
    }
    std::lock_guard lock(mu_);
    if (now - window_start_ >= std::chrono::seconds(1)) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ >= per_second_) {
      spent_until_.store((window_start_ + std::chrono::seconds(1)).time_since_epoch().count(),
                         std::memory_order_relaxed);
      return false;
    }
    ++used_;
    return true;
  }

 private:
  std::mutex mu_;
  std::size_t per_second_;
  Clock::time_point window_start_{};
  std::size_t used_ = 0;
  // The end of the current window when its budget is spent (a Clock count); before that, none.
  std::atomic<Clock::rep> spent_until_{std::numeric_limits<Clock::rep>::min()};
};

// Shared by every connection; outlives them all.
struct GatewayContext {
  GatewayConfig config;
  std::unique_ptr<ReplicaSet> replicas;
  std::unique_ptr<ModelRegistry> models;
  std::unique_ptr<CanonicalizeStage> stage;
  std::unique_ptr<UpstreamPool> pool;
  std::vector<tcp::endpoint> endpoints;   // per replica, resolved at start
  std::vector<std::string> host_headers;  // per replica, "HOST:PORT" (the Host it is sent)
  serving::Metrics metrics;
  ProxyMetrics m;
  std::unique_ptr<LiveStats> stats;  // GET /stats and /dashboard
  std::unique_ptr<AdminGate> admin;  // who may see the admin routes (admin_routes.cpp)
  PrepOptions prep;
  std::atomic<std::uint64_t> next_request_id{1};
  RateLimiter finding_log;  // canonicalization findings sampled to the log
  // Tenant limits and the gateway-wide bound; null when neither is configured (no lock taken).
  std::unique_ptr<AdmissionControl> admission;
  const serving::HttpServer* http = nullptr;

  // Once a shutdown started: no keep-alive, background loops and long streams end.
  bool draining() const { return http->draining(); }
};

// Read buffers an upstream Exchange borrows: a client connection's successive requests reuse
// them rather than allocating 32 KiB each (an Exchange lives for one request).
struct ExchangeBuffers {
  beast::flat_buffer buffer;      // the upstream response as read off the socket
  std::unique_ptr<char[]> chunk;  // a body piece handed to the caller, uninitialized
  std::string head;               // the request's head as written upstream
  // The deadline on the upstream socket's reads (the first byte's, then the idle one between
  // pieces of the body), made at the first exchange on the connection's thread.
  std::optional<serving::SocketDeadline> deadline;
};

// A client connection as the gateway's handlers see it: the serving core's connection (its
// stream and deadlines), the gateway, and buffers kept across the connection's requests.
struct Connection : serving::ConnectionState {
  Connection(serving::Connection& io_, GatewayContext& ctx_)
      : io(io_), stream(io_.stream), ctx(ctx_) {}
  serving::Connection& io;
  beast::tcp_stream& stream;
  GatewayContext& ctx;
  ExchangeBuffers upstream = {};
};

// What the router learned about a request before handing it to a handler.
struct RequestInfo {
  std::string request_id;
  // "/v1/chat/completions", ...: a view of the request's target (the request outlives its
  // RequestInfo) or a literal, not a copy per request.
  std::string_view route;
  Tenant tenant;
  std::string session_key;  // x-prefixgate-session; see session_key_for()
  std::string api_key;      // the bearer token, "" when none was sent
  // The Authorization header held the admin key (explain): the tenant's key is x-api-key.
  bool admin_bearer = false;
  SteadyClock::time_point received;
  bool keep_alive = true;
};

using serving::error_response;
using serving::make_response;
// Adds x-request-id, x-prefixgate-replica (when known) and x-prefixgate-overhead-us.
template <class Message>
void add_gateway_headers(Message& res, const RequestInfo& info, std::string_view replica,
                         std::chrono::microseconds overhead) {
  res.set("x-request-id", info.request_id);
  res.set("x-prefixgate-replica", replica.empty() ? std::string_view("none") : replica);
  res.set("x-prefixgate-overhead-us", std::to_string(overhead.count()));
}
// Writes `res` under the write deadline; counts it. False when the client is gone.
Awaitable<bool> write_response(Connection& c, const RequestInfo& info, Response res,
                               std::string_view replica = {});

// POST /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses. Returns whether to
// keep the connection.
Awaitable<bool> handle_completion(Connection& c, const Request& req, RequestInfo& info,
                                  canon::Api api);
// GET /v1/models from the upstreams, and any other /v1/* passed through to a healthy upstream.
Awaitable<bool> handle_models(Connection& c, const Request& req, RequestInfo& info);
Awaitable<bool> handle_passthrough(Connection& c, const Request& req, RequestInfo& info);
// POST /prefixgate/explain/{chat/completions,completions,messages,responses}: the routing the
// gateway would do.
Awaitable<bool> handle_explain(Connection& c, const Request& req, RequestInfo& info,
                               canon::Api api);

// The admin routes (/metrics, /stats, /dashboard, /, /admin/login, /admin/logout and
// /prefixgate/explain): answers them, or refuses them (401, 403; 404 on the main listener when
// admin_listen serves them), and refuses the API on the admin listener (404). Returns nullopt
// for what the API routes answer: /health, the API, and an admitted explain request (with
// info.admin_bearer set when the admin key came as the bearer token).
Awaitable<std::optional<bool>> route_admin(Connection& c, const Request& req, RequestInfo& info,
                                           std::string_view path);
// Whether route_admin() has anything to do with `path` on this connection: the API's requests
// skip it (a coroutine frame each).
bool concerns_admin(const Connection& c, std::string_view path);

// GET /stats (the live stats as JSON; ?since=UNIX_MS for the samples after it) and
// GET /dashboard (the page that reads it, compiled into the binary). Nothing goes upstream.
Response dashboard_response(GatewayContext& ctx, const Request& req, std::string_view path,
                            bool keep_alive);
// Closes a live-stats interval every LiveStatsOptions::interval_ms until the drain.
Awaitable<void> run_stats_sampler(GatewayContext& ctx);

// Background loops, one per replica: /v1/kv_events (prefixgate upstreams), the /metrics load
// read (vllm and sglang upstreams), and the health check (all).
Awaitable<void> run_kv_events(GatewayContext& ctx, ReplicaId replica);
Awaitable<void> run_load_scrape(GatewayContext& ctx, ReplicaId replica);
Awaitable<void> run_health_checks(GatewayContext& ctx, ReplicaId replica);

}  // namespace prefixgate::gateway::server
