// The listener, the per-connection loop, authentication, and the router.
//
// One coroutine per client connection on its own strand (Beast's server-flex-awaitable
// pattern): read a request under the idle deadline with body and header limits on the parser,
// route it, write the answer, repeat while keep-alive holds. Shutdown closes the acceptor,
// wakes idle connections so they close, lets busy ones finish, and gives up after the drain
// timeout. Background coroutines (health checks, kv_events) run on their own strands.
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <condition_variable>
#include <map>
#include <thread>

#include "prefixgate/canonicalize/json.h"
#include "server/context.h"
#include "server/gateway.h"
#include "server/upstream_pool.h"

namespace prefixgate::gateway::server {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string_view path_of(std::string_view target) {
  return target.substr(0, std::min(target.find('?'), target.size()));
}

std::string new_request_id(GatewayContext& ctx) {
  return "pg-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count() %
                        1000000000000) +
         "-" + std::to_string(ctx.next_request_id.fetch_add(1));
}

// Authentication and tenant. Returns false (and an error in `error`) for a missing/unknown key.
bool identify(const GatewayContext& ctx, const Request& req, RequestInfo& info,
              std::string& error) {
  const TenantConfig& t = ctx.config.tenants;
  std::string_view key;
  const std::string_view auth = req[http::field::authorization];
  if (auth.starts_with("Bearer ")) key = auth.substr(7);
  if (!t.api_keys.empty()) {
    const auto it = std::find_if(t.api_keys.begin(), t.api_keys.end(),
                                 [&](const ApiKey& k) { return k.key == key; });
    if (it == t.api_keys.end()) {
      error = key.empty() ? "missing API key: send Authorization: Bearer KEY" : "invalid API key";
      return false;
    }
    if (!it->tenant.empty()) info.tenant = Tenant{it->tenant, it->isolate};
  }
  if (info.tenant.name.empty() && !t.tenant_header.empty()) {
    const std::string_view h = req[t.tenant_header];
    if (!h.empty()) info.tenant = Tenant{std::string(h), t.isolate_header_tenants};
  }
  // The header wins; without it the handler falls back to the body's `user`, then the key.
  info.session_key = std::string(req["x-prefixgate-session"]);
  info.api_key = std::string(key);
  return true;
}

std::string health_body(const GatewayContext& ctx, bool& up) {
  std::size_t healthy = 0;
  json::Array replicas;
  for (const ReplicaStatus& s : ctx.replicas->status()) {
    healthy += s.view.healthy ? 1 : 0;
    replicas.push_back(json::Object{{"url", s.name}, {"healthy", s.view.healthy}});
  }
  up = healthy > 0 && !ctx.draining.load();
  return json::to_json(json::Object{
      {"status", ctx.draining.load() ? "draining" : (up ? "ok" : "no_healthy_upstream")},
      {"healthy_upstreams", static_cast<double>(healthy)},
      {"upstreams", std::move(replicas)}});
}

// Routes one request; returns whether the connection stays open.
Awaitable<bool> route(Connection& c, const Request& req) {
  GatewayContext& ctx = c.ctx;
  RequestInfo info;
  info.received = SteadyClock::now();
  info.keep_alive = req.keep_alive() && !ctx.draining.load();
  const std::string_view given_id = req["x-request-id"];
  info.request_id =
      given_id.empty() || given_id.size() > 200 ? new_request_id(ctx) : std::string(given_id);
  const std::string_view path = path_of(req.target());
  info.route =
      path.starts_with("/v1/") || path.starts_with("/prefixgate/") ? std::string(path) : "other";
  const auto method_not_allowed = [&](const char* allowed) {
    Response res =
        error_response(req, http::status::method_not_allowed,
                       std::string("method ") + std::string(req.method_string()) +
                           " is not allowed on " + std::string(path) + " (use " + allowed + ")",
                       "method_not_allowed", info.keep_alive);
    res.set(http::field::allow, allowed);
    return res;
  };

  if (path == "/health" || path == "/metrics") {
    if (req.method() != http::verb::get) {
      co_return co_await write_response(c, info, method_not_allowed("GET"));
    }
    if (path == "/health") {
      bool up = false;
      std::string body = health_body(ctx, up);
      co_return co_await write_response(
          c, info,
          make_response(req, up ? http::status::ok : http::status::service_unavailable,
                        "application/json", std::move(body), info.keep_alive));
    }
    co_return co_await write_response(
        c, info,
        make_response(req, http::status::ok, "text/plain; version=0.0.4", ctx.metrics.render(),
                      info.keep_alive));
  }
  if (path == "/stats" || path == "/dashboard" || path == "/") {
    if (req.method() != http::verb::get) {
      co_return co_await write_response(c, info, method_not_allowed("GET"));
    }
    co_return co_await write_response(c, info, dashboard_response(ctx, req, path, info.keep_alive));
  }
  if (!path.starts_with("/v1/") && !path.starts_with("/prefixgate/")) {
    co_return co_await write_response(
        c, info,
        error_response(req, http::status::not_found, "no route for " + std::string(path),
                       "not_found", info.keep_alive));
  }
  std::string auth_error;
  if (!identify(ctx, req, info, auth_error)) {
    Response res = error_response(req, http::status::unauthorized, auth_error, "invalid_api_key",
                                  info.keep_alive);
    res.set(http::field::www_authenticate, "Bearer");
    co_return co_await write_response(c, info, std::move(res));
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions" ||
      path == "/prefixgate/explain/chat/completions" || path == "/prefixgate/explain/completions") {
    if (req.method() != http::verb::post) {
      co_return co_await write_response(c, info, method_not_allowed("POST"));
    }
    const canon::Endpoint endpoint = path.ends_with("/chat/completions")
                                         ? canon::Endpoint::kChatCompletions
                                         : canon::Endpoint::kCompletions;
    if (path.starts_with("/prefixgate/")) {
      co_return co_await handle_explain(c, req, info, endpoint);
    }
    co_return co_await handle_completion(c, req, info, endpoint);
  }
  if (path == "/v1/models") {
    if (req.method() != http::verb::get) {
      co_return co_await write_response(c, info, method_not_allowed("GET"));
    }
    co_return co_await handle_models(c, req, info);
  }
  if (path.starts_with("/v1/")) co_return co_await handle_passthrough(c, req, info);
  co_return co_await write_response(
      c, info,
      error_response(req, http::status::not_found, "no route for " + std::string(path), "not_found",
                     info.keep_alive));
}

}  // namespace

Response make_response(const Request& req, http::status status, std::string content_type,
                       std::string body, bool keep_alive) {
  Response res{status, req.version()};
  res.set(http::field::server, "prefixgate");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response error_response(const Request& req, http::status status, std::string_view message,
                        std::string_view code, bool keep_alive) {
  const int s = static_cast<int>(status);
  const char* type = s == 401   ? "authentication_error"
                     : s >= 500 ? "server_error"
                                : "invalid_request_error";
  std::string body = json::to_json(json::Object{
      {"error",
       json::Object{
           {"message", message}, {"type", type}, {"param", json::Null{}}, {"code", code}}}});
  return make_response(req, status, "application/json", std::move(body), keep_alive);
}

Awaitable<bool> write_response(Connection& c, const RequestInfo& info, Response res,
                               std::string_view replica) {
  add_gateway_headers(
      res, info, replica,
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - info.received));
  c.ctx.m.requests->add({info.route, std::to_string(res.result_int()),
                         replica.empty() ? "none" : std::string(replica), info.tenant.name});
  const bool keep = res.keep_alive();
  c.stream.expires_after(c.ctx.config.timeouts.write);
  auto [ec, n] = co_await http::async_write(c.stream, res, kTuple);
  co_return !ec && keep;
}

// ---------------------------------------------------------------------------------------------

struct Gateway::Impl {
  // Declared first so it is destroyed last: coroutine frames refer to it.
  asio::io_context ioc;
  GatewayContext ctx;
  GatewayOptions options;
  asio::strand<asio::io_context::executor_type> accept_strand{ioc.get_executor()};
  tcp::acceptor acceptor{accept_strand};
  asio::signal_set signals{ioc};

  struct Live {
    asio::any_io_executor executor;
    beast::tcp_stream* stream = nullptr;
    bool* idle = nullptr;  // touched on the connection's strand only
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, Live> live;
  std::uint64_t next_connection = 0;
  bool shutdown_requested = false;

  Awaitable<void> accept_loop();
  Awaitable<void> session(tcp::socket socket);
  void register_metrics();
};

void Gateway::Impl::register_metrics() {
  Metrics& m = ctx.metrics;
  const std::string p = "prefixgate_";
  ctx.m.requests = &m.counter(p + "requests_total", "Requests answered, by route and status.",
                              {"route", "status", "replica", "tenant"});
  ctx.m.ttft =
      &m.histogram(p + "time_to_first_token_seconds", "Arrival to the first streamed event.",
                   {"replica"}, latency_buckets_seconds());
  ctx.m.ttft_by_cache = &m.histogram(
      p + "time_to_first_token_by_cache_seconds",
      "Arrival to the first streamed event, by whether the engine served at least half the "
      "prompt from cache (hit) or not (miss).",
      {"cache"}, latency_buckets_seconds());
  ctx.m.e2e = &m.histogram(p + "request_duration_seconds", "Arrival to the last byte.", {"route"},
                           latency_buckets_seconds());
  ctx.m.overhead = &m.histogram(p + "gateway_overhead_seconds",
                                "Time the gateway itself added before forwarding.", {"route"},
                                latency_buckets_seconds());
  ctx.m.prompt_tokens = &m.counter(p + "prompt_tokens_total", "Prompt tokens (engine-reported).",
                                   {"replica", "tenant"});
  ctx.m.cached_tokens =
      &m.counter(p + "cached_tokens_total",
                 "Prompt tokens served from the replica's prefix cache (engine-reported).",
                 {"replica", "tenant"});
  ctx.m.predicted_cached_tokens = &m.counter(p + "predicted_cached_tokens_total",
                                             "Cached tokens the router predicted.", {"replica"});
  ctx.m.prediction_error =
      &m.histogram(p + "cached_tokens_prediction_error_tokens",
                   "|engine-reported - predicted| cached tokens.", {}, token_buckets());
  ctx.m.decisions = &m.counter(p + "routing_decisions_total", "Routing decisions by reason.",
                               {"policy", "reason"});
  ctx.m.retries =
      &m.counter(p + "retries_total", "Requests retried on another replica.", {"reason"});
  ctx.m.upstream_failures = &m.counter(p + "upstream_failures_total",
                                       "Failed exchanges with a replica.", {"replica", "kind"});
  ctx.m.canonicalization = &m.counter(
      p + "canonicalization_changes_total",
      "Canonicalization changes, by rule and mode (observe: counted only).", {"rule", "mode"});
  ctx.m.findings = &m.counter(p + "prompt_findings_total",
                              "Volatile content found in prompts, by lint rule.", {"rule"});
  ctx.m.kv_events =
      &m.counter(p + "kv_events_total", "kv_events lines applied.", {"replica", "type"});
  ReplicaSet* replicas = ctx.replicas.get();
  const auto per_replica = [replicas](auto read) {
    return [replicas, read] {
      std::vector<GaugeSample> out;
      for (const ReplicaStatus& s : replicas->status()) out.push_back({{s.name}, read(s)});
      return out;
    };
  };
  m.gauge_callback(p + "upstream_healthy", "1 when the replica is admitted.", {"replica"},
                   per_replica([](const ReplicaStatus& s) { return s.view.healthy ? 1.0 : 0.0; }));
  m.gauge_callback(p + "upstream_inflight_requests", "Requests in flight per replica.", {"replica"},
                   per_replica([](const ReplicaStatus& s) {
                     return static_cast<double>(s.view.inflight_requests);
                   }));
  m.gauge_callback(p + "upstream_tokens_queued_for_prefill", "From the replica's load reports.",
                   {"replica"}, per_replica([](const ReplicaStatus& s) {
                     return static_cast<double>(s.view.tokens_queued_for_prefill);
                   }));
  m.gauge_callback(
      p + "upstream_running_sequences", "From the replica's load reports.", {"replica"},
      per_replica([](const ReplicaStatus& s) { return static_cast<double>(s.view.running); }));
  m.gauge_callback(
      p + "upstream_waiting_sequences", "From the replica's load reports.", {"replica"},
      per_replica([](const ReplicaStatus& s) { return static_cast<double>(s.view.waiting); }));
  m.gauge_callback(p + "upstream_kv_usage_ratio",
                   "KV pages in use over KV pages, from the replica's load reports.", {"replica"},
                   per_replica([](const ReplicaStatus& s) {
                     return s.view.kv_pages_total == 0
                                ? 0.0
                                : static_cast<double>(s.view.kv_pages_used) /
                                      static_cast<double>(s.view.kv_pages_total);
                   }));
  m.gauge_callback(
      p + "upstream_preemptions",
      "Sequences the replica has preempted since it started (its load reports).", {"replica"},
      per_replica([](const ReplicaStatus& s) { return static_cast<double>(s.preemptions_total); }));
  m.gauge_callback(
      p + "index_blocks", "Blocks the prefix index holds per replica.", {"replica"},
      per_replica([](const ReplicaStatus& s) { return static_cast<double>(s.index_blocks); }));
  m.gauge_callback(p + "kv_events_age_seconds", "Seconds since the replica's last kv_events line.",
                   {"replica"},
                   per_replica([](const ReplicaStatus& s) { return s.seconds_since_event; }));
  m.gauge_callback(
      p + "index_size_hashes", "Distinct block hashes in the prefix index.", {}, [replicas] {
        return std::vector<GaugeSample>{{{}, static_cast<double>(replicas->index_size())}};
      });
}

Awaitable<void> Gateway::Impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), kTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    asio::co_spawn(socket.get_executor(), session(std::move(socket)), asio::detached);
  }
}

Awaitable<void> Gateway::Impl::session(tcp::socket socket) {
  Connection c{beast::tcp_stream(std::move(socket)), {}, ctx};
  bool idle = false;
  std::uint64_t id;
  bool over_limit;
  {
    std::lock_guard lock(mu);
    id = next_connection++;
    over_limit = live.size() >= ctx.config.limits.max_connections;
    live[id] = Live{c.stream.get_executor(), &c.stream, &idle};
  }
  beast::error_code ignored;
  c.stream.socket().set_option(tcp::no_delay(true), ignored);
  // Reads are sized by the buffer's free capacity (512 bytes when empty): room for a typical
  // request in one read instead of a system call per 512 bytes.
  c.buffer.reserve(16 * 1024);
  try {
    if (over_limit) {
      Request bare;
      bare.version(11);
      RequestInfo info;
      info.route = "other";
      info.request_id = new_request_id(ctx);
      info.received = SteadyClock::now();
      co_await write_response(
          c, info,
          error_response(bare, http::status::service_unavailable, "too many connections",
                         "too_many_connections", false));
    }
    while (!over_limit && !ctx.draining.load()) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(ctx.config.limits.max_body_bytes);
      parser.header_limit(static_cast<std::uint32_t>(ctx.config.limits.max_header_bytes));
      c.stream.expires_after(ctx.config.timeouts.client_idle);
      idle = true;
      auto [ec, n] = co_await http::async_read(c.stream, c.buffer, parser, kTuple);
      idle = false;
      if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
          ec == beast::error::timeout || ec == asio::error::connection_reset ||
          ec == asio::error::eof) {
        break;
      }
      if (ec) {
        // Malformed HTTP or over a limit: answer, then close (the rest is still on the wire).
        const bool too_large = ec == http::error::body_limit;
        const bool header_large = ec == http::error::header_limit;
        Request bare;
        bare.version(11);
        RequestInfo info;
        info.route = "other";
        info.request_id = new_request_id(ctx);
        info.received = SteadyClock::now();
        const std::string message =
            too_large ? "request body is larger than " +
                            std::to_string(ctx.config.limits.max_body_bytes) + " bytes"
            : header_large ? "request headers are larger than " +
                                 std::to_string(ctx.config.limits.max_header_bytes) + " bytes"
                           : "malformed HTTP request: " + ec.message();
        const http::status status = too_large      ? http::status::payload_too_large
                                    : header_large ? http::status::request_header_fields_too_large
                                                   : http::status::bad_request;
        co_await write_response(
            c, info,
            error_response(bare, status, message, too_large ? "too_large" : "bad_request", false));
        // Lingering close: read and discard what the client is still sending for a moment, so
        // it sees the answer rather than a reset (RFC 9112 section 9.6).
        c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        std::vector<char> sink(64 * 1024);
        c.stream.expires_after(std::chrono::seconds(2));
        for (std::size_t drained = 0; drained < (256u << 20);) {
          auto [rec, got] = co_await c.stream.async_read_some(asio::buffer(sink), kTuple);
          if (rec) break;
          drained += got;
        }
        break;
      }
      const Request req = parser.release();
      if (!co_await route(c, req)) break;
    }
  } catch (const std::exception& e) {
    spdlog::error("connection: {}", e.what());
  }
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  c.stream.close();
  {
    std::lock_guard lock(mu);
    live.erase(id);
  }
  cv.notify_all();
}

Gateway::Gateway(GatewayConfig config, GatewayOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->ctx.config = std::move(config);
  impl_->options = options;
}

Gateway::~Gateway() = default;

canon::Result<std::uint16_t> Gateway::start() {
  Impl& s = *impl_;
  GatewayContext& ctx = s.ctx;
  if (auto ok = validate(ctx.config); !ok) return ok.error();
  auto policy = make_policy(ctx.config.policy);
  if (!policy) return policy.error();
  auto models = ModelRegistry::load(ctx.config.models);
  if (!models) return models.error();
  ctx.models = std::move(*models);
  ctx.stage = std::make_unique<CanonicalizeStage>(ctx.config.canonicalization);
  ctx.prep.stage = ctx.stage.get();
  ctx.prep.models = ctx.models.get();
  ctx.prep.limits.max_body_bytes = ctx.config.limits.max_body_bytes;
  ctx.prep.lint = ctx.stage->mode(canon::kRuleTimestamp) == RuleMode::kObserve;
  ctx.finding_log.set_rate(ctx.config.canonicalization.log_samples_per_s);
  ctx.replicas = std::make_unique<ReplicaSet>(ctx.config.upstreams, std::move(*policy),
                                              IndexConfig{}, ctx.config.eject_after_failures);
  ctx.pool = std::make_unique<UpstreamPool>(ctx.config.upstreams.size(),
                                            ctx.config.limits.max_idle_upstream_connections);
  tcp::resolver resolver(s.ioc);
  for (std::size_t i = 0; i < ctx.config.upstreams.size(); ++i) {
    const UpstreamConfig& up = ctx.config.upstreams[i];
    beast::error_code ec;
    auto results = resolver.resolve(up.host, std::to_string(up.port), ec);
    if (ec || results.empty()) {
      return canon::make_error(
          canon::ErrorCode::kInvalidValue,
          "upstreams[" + std::to_string(i) + "]: cannot resolve " + up.host + ": " + ec.message(),
          "upstreams[" + std::to_string(i) + "]");
    }
    ctx.endpoints.push_back(results.begin()->endpoint());
  }
  s.register_metrics();
  std::vector<std::string> replica_names;
  for (const UpstreamConfig& up : ctx.config.upstreams) replica_names.push_back(up.url);
  ctx.stats = std::make_unique<LiveStats>(LiveStatsOptions{}, std::move(replica_names),
                                          std::string(ctx.replicas->policy_name()), unix_now_ms());

  beast::error_code ec;
  const auto address = asio::ip::make_address(ctx.config.host, ec);
  if (ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue,
                             "listen: bad host '" + ctx.config.host + "': " + ec.message(),
                             "listen");
  }
  const tcp::endpoint endpoint{address, ctx.config.port};
  if (s.acceptor.open(endpoint.protocol(), ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue, "socket: " + ec.message(), "listen");
  }
  (void)s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (s.acceptor.bind(endpoint, ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue,
                             "listen: cannot bind " + ctx.config.host + ":" +
                                 std::to_string(ctx.config.port) + ": " + ec.message(),
                             "listen");
  }
  if (s.acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue, "listen: " + ec.message(), "listen");
  }
  asio::co_spawn(s.accept_strand, s.accept_loop(), asio::detached);
  asio::co_spawn(asio::make_strand(s.ioc), run_stats_sampler(ctx), asio::detached);
  for (ReplicaId r = 0; r < ctx.config.upstreams.size(); ++r) {
    asio::co_spawn(asio::make_strand(s.ioc), run_health_checks(ctx, r), asio::detached);
    if (ctx.config.upstreams[r].kind == ReplicaKind::kPrefixgate) {
      asio::co_spawn(asio::make_strand(s.ioc), run_kv_events(ctx, r), asio::detached);
    }
  }
  if (s.options.handle_signals) {
    s.signals.add(SIGINT);
    s.signals.add(SIGTERM);
    s.signals.async_wait([this](const beast::error_code& err, int signal) {
      if (err) return;
      spdlog::info("signal {}: draining", signal);
      request_shutdown();
    });
  }
  return s.acceptor.local_endpoint().port();
}

void Gateway::request_shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.shutdown_requested) return;
    s.shutdown_requested = true;
  }
  s.ctx.draining.store(true);
  asio::post(s.accept_strand, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    s.signals.cancel();
  });
  std::lock_guard lock(s.mu);
  for (auto& [id, live] : s.live) {
    // On the connection's strand, so `idle` and the stream are not touched concurrently.
    asio::post(live.executor, [&s, id = id] {
      std::lock_guard inner(s.mu);
      auto it = s.live.find(id);
      if (it != s.live.end() && *it->second.idle) it->second.stream->cancel();
    });
  }
  s.cv.notify_all();
}

void Gateway::run() {
  Impl& s = *impl_;
  std::vector<std::thread> threads;
  auto work = asio::make_work_guard(s.ioc);
  std::size_t n = s.ctx.config.threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (std::size_t i = 0; i < n; ++i) threads.emplace_back([&s] { s.ioc.run(); });
  {
    std::unique_lock lock(s.mu);
    s.cv.wait(lock, [&] { return s.shutdown_requested; });
    if (!s.cv.wait_for(lock, s.ctx.config.timeouts.drain, [&] { return s.live.empty(); })) {
      spdlog::warn("drain timeout: {} connections still open", s.live.size());
    }
  }
  work.reset();
  s.ioc.stop();
  for (std::thread& t : threads) t.join();
}

}  // namespace prefixgate::gateway::server
