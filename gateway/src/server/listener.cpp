// The gateway's routes: authentication and tenants, then each path to its handler, on the
// serving core's HttpServer (listener, limits, drain). Gateway::start() wires the replicas,
// the models, the metrics and the background loops (health checks, kv_events, live stats).
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <charconv>
#include <random>

#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/canonicalize/json.h"
#include "prefixgate/serving/server.h"
#include "server/context.h"
#include "server/gateway.h"
#include "server/kv_events_zmq.h"
#include "server/peer_link.h"
#include "server/upstream_pool.h"

namespace prefixgate::gateway::server {
namespace {

// "pg-" TIME "-" SEQUENCE, appended in place rather than concatenated from temporaries.
std::string new_request_id(GatewayContext& ctx) {
  char digits[24];  // any 64-bit integer
  std::string id;
  id.reserve(48);
  id += "pg-";
  const auto time = std::chrono::system_clock::now().time_since_epoch().count() % 1000000000000;
  id.append(digits, std::to_chars(digits, digits + sizeof digits, time).ptr);
  id += '-';
  id.append(digits,
            std::to_chars(digits, digits + sizeof digits, ctx.next_request_id.fetch_add(1)).ptr);
  return id;
}

// Authentication and tenant. Returns false (and an error in `error`) for a missing/unknown key.
bool identify(const GatewayContext& ctx, const Request& req, RequestInfo& info,
              std::string& error) {
  const TenantConfig& t = ctx.config.tenants;
  // Authorization: Bearer KEY (OpenAI's clients), else x-api-key: KEY (Anthropic's). When the
  // bearer token was the admin key (explain), only x-api-key can name a tenant, and the admin
  // may explain without one.
  std::string_view key;
  const std::string_view auth = serving::field_value(req, http::field::authorization);
  if (auth.starts_with("Bearer ") && !info.admin_bearer) key = auth.substr(7);
  if (key.empty()) key = serving::field_value(req, "x-api-key");
  if (!t.api_keys.empty() && !(info.admin_bearer && key.empty())) {
    // Every configured key is compared, whichever matches.
    auto it = t.api_keys.end();
    for (auto k = t.api_keys.begin(); k != t.api_keys.end(); ++k) {
      if (same_secret(key, k->key) && it == t.api_keys.end()) it = k;
    }
    if (it == t.api_keys.end()) {
      error = key.empty() ? "missing API key: send Authorization: Bearer KEY or x-api-key: KEY"
                          : "invalid API key";
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
  up = healthy > 0 && !ctx.draining();
  return json::to_json(
      json::Object{{"status", ctx.draining() ? "draining" : (up ? "ok" : "no_healthy_upstream")},
                   {"healthy_upstreams", static_cast<double>(healthy)},
                   {"upstreams", std::move(replicas)}});
}

// Routes one request; returns whether the connection stays open.
Awaitable<bool> route(Connection& c, const Request& req) {
  GatewayContext& ctx = c.ctx;
  RequestInfo info;
  info.received = SteadyClock::now();
  info.keep_alive = req.keep_alive() && !ctx.draining();
  const std::string_view given_id = req["x-request-id"];
  info.request_id =
      given_id.empty() || given_id.size() > 200 ? new_request_id(ctx) : std::string(given_id);
  const std::string_view path = serving::path_of(req.target());
  info.route = path.starts_with("/v1/") || path.starts_with("/prefixgate/")
                   ? path
                   : std::string_view("other");
  const auto method_not_allowed = [&](const char* allowed) {
    Response res =
        error_response(req, http::status::method_not_allowed,
                       std::string("method ") + std::string(req.method_string()) +
                           " is not allowed on " + std::string(path) + " (use " + allowed + ")",
                       "method_not_allowed", info.keep_alive);
    res.set(http::field::allow, allowed);
    return res;
  };

  // /metrics, /stats, /dashboard, explain: admin_routes.cpp.
  if (concerns_admin(c, path)) {
    if (std::optional<bool> done = co_await route_admin(c, req, info, path)) co_return *done;
  }
  if (path == "/health") {
    if (req.method() != http::verb::get) {
      co_return co_await write_response(c, info, method_not_allowed("GET"));
    }
    bool up = false;
    std::string body = health_body(ctx, up);
    co_return co_await write_response(
        c, info,
        make_response(req, up ? http::status::ok : http::status::service_unavailable,
                      "application/json", std::move(body), info.keep_alive));
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
  constexpr std::string_view kExplain = "/prefixgate/explain";
  const bool explain = path.starts_with(kExplain);
  const std::optional<canon::Api> api =
      explain ? canon::api_for_path("/v1" + std::string(path.substr(kExplain.size())))
              : canon::api_for_path(path);
  if (api) {
    if (req.method() != http::verb::post) {
      co_return co_await write_response(c, info, method_not_allowed("POST"));
    }
    if (explain) co_return co_await handle_explain(c, req, info, *api);
    co_return co_await handle_completion(c, req, info, *api);
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

Awaitable<bool> write_response(Connection& c, const RequestInfo& info, Response res,
                               std::string_view replica) {
  add_gateway_headers(
      res, info, replica,
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - info.received));
  c.ctx.m.requests->add({info.route, std::to_string(res.result_int()),
                         replica.empty() ? std::string_view("none") : replica, info.tenant.name});
  const bool keep = res.keep_alive();
  co_return co_await serving::write_response(c.io, std::move(res)) && keep;
}

// ---------------------------------------------------------------------------------------------

namespace {

// Hands each connection's requests to route(); answers the server refuses itself carry the
// gateway's headers and are counted like any other.
class GatewayHandler : public serving::Handler {
 public:
  explicit GatewayHandler(GatewayContext& ctx) : ctx_(ctx) {}

  std::unique_ptr<serving::ConnectionState> open(serving::Connection& io) override {
    auto c = std::make_unique<Connection>(io, ctx_);
    // Reads are sized by the buffer's free capacity: room for a typical response in one read.
    c->upstream.buffer.reserve(16 * 1024);
    return c;
  }

  Awaitable<bool> handle(serving::Connection& io, Request& req) override {
    return route(static_cast<Connection&>(*io.state), req);
  }

  void refused(Response& res) override {
    RequestInfo info;
    info.route = "other";
    info.request_id = new_request_id(ctx_);
    info.received = SteadyClock::now();
    add_gateway_headers(res, info, {}, std::chrono::microseconds(0));
    ctx_.m.requests->add({info.route, std::to_string(res.result_int()), "none", ""});
  }

 private:
  GatewayContext& ctx_;
};

serving::ServerOptions http_options(const GatewayConfig& config, const GatewayOptions& options) {
  serving::ServerOptions o;
  o.host = config.host;
  o.port = config.port;
  o.threads = config.threads;
  o.server_name = "prefixgate";
  o.max_body_bytes = config.limits.max_body_bytes;
  o.max_header_bytes = config.limits.max_header_bytes;
  o.max_connections = config.limits.max_connections;
  o.idle_timeout = config.timeouts.client_idle;
  o.request_timeout = config.timeouts.client_request;
  o.write_timeout = config.timeouts.write;
  o.drain_timeout = config.timeouts.drain;
  o.handle_signals = options.handle_signals;
  return o;
}

}  // namespace

struct Gateway::Impl {
  // Declared first, destroyed last: the upstream pool's idle sockets and every coroutine frame
  // are bound to the server's io_context, which must outlive them (the frames it destroys last
  // only release what they own).
  std::unique_ptr<serving::HttpServer> http;
  GatewayContext ctx;
  GatewayOptions options;
  GatewayHandler handler{ctx};
  // The ZeroMQ followers of vllm and sglang upstreams: their thread writes into ctx.replicas and
  // ctx.m, so they are destroyed (their thread joined) first.
  std::unique_ptr<KvEventFollowers> followers;
  // Peer gateways' datagrams: its thread writes into ctx.replicas too.
  std::unique_ptr<PeerLink> peers;
  std::uint16_t admin_port = 0;
  std::uint16_t peer_port = 0;
};

Gateway::Gateway(GatewayConfig config, GatewayOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->ctx.config = std::move(config);
  impl_->options = options;
}

Gateway::~Gateway() = default;

Result<std::uint16_t> Gateway::start() {
  Impl& s = *impl_;
  GatewayContext& ctx = s.ctx;
  if (auto ok = validate(ctx.config); !ok) return ok.error();
  PolicyConfig policy_config;
  policy_config.cache_aware.offload_hit_weight = ctx.config.routing.offload_hit_weight;
  // Peered gateways see each other's sends: each routes as the only gateway would, and the rules
  // for gateways blind to each other's sends (routing.gateways) stay off.
  policy_config.cache_aware.gateways = ctx.config.peers.enabled() ? 1 : ctx.config.routing.gateways;
  if (ctx.config.peers.enabled() && ctx.config.routing.gateways > 1) {
    spdlog::info("peers: routing.gateways ({}) is not used; peered gateways see each other's sends",
                 ctx.config.routing.gateways);
  }
  // A seed of this process's own: gateways behind one load balancer must not draw alike (random,
  // power_of_two) nor go round the replicas in the same order (cache_aware's turns).
  std::random_device entropy;
  policy_config.seed = (std::uint64_t{entropy()} << 32) | entropy();
  auto policy = make_policy(ctx.config.policy, policy_config);
  if (!policy) return policy.error();
  auto models = ModelRegistry::load(ctx.config.models, ctx.config.tokenizer_cache);
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
  s.http = std::make_unique<serving::HttpServer>(http_options(ctx.config, s.options), s.handler);
  ctx.http = s.http.get();
  asio::io_context& ioc = s.http->io_context();
  tcp::resolver resolver(ioc);
  for (std::size_t i = 0; i < ctx.config.upstreams.size(); ++i) {
    const UpstreamConfig& up = ctx.config.upstreams[i];
    beast::error_code ec;
    auto results = resolver.resolve(up.host, std::to_string(up.port), ec);
    if (ec || results.empty()) {
      return make_error(
          ErrorCode::kInvalidValue,
          "upstreams[" + std::to_string(i) + "]: cannot resolve " + up.host + ": " + ec.message(),
          "upstreams[" + std::to_string(i) + "]");
    }
    ctx.endpoints.push_back(results.begin()->endpoint());
    ctx.host_headers.push_back(up.host + ":" + std::to_string(up.port));
  }
  ctx.m = register_proxy_metrics(ctx.metrics, *ctx.replicas);
  if (const canon::SegmentCache* cache = ctx.models->segment_cache()) {
    register_segment_cache_metrics(ctx.metrics, *cache);
  }
  ctx.prep.template_errors = ctx.m.template_errors;
  if (ctx.config.admission.enabled()) {
    ctx.admission = std::make_unique<AdmissionControl>(ctx.config.admission);
    ctx.admission->register_metrics(ctx.metrics);
  }
  for (const ModelEntry& e : ctx.models->entries()) {
    spdlog::info("model {}: {}", e.name.empty() ? "default" : e.name, e.description);
  }
  std::vector<std::string> replica_names;
  for (const UpstreamConfig& up : ctx.config.upstreams) replica_names.push_back(up.url);
  ctx.stats = std::make_unique<LiveStats>(LiveStatsOptions{}, std::move(replica_names),
                                          std::string(ctx.replicas->policy_name()), unix_now_ms());
  const AdminConfig& admin = ctx.config.admin;
  const std::string admin_host = admin.host.empty() ? ctx.config.host : admin.host;
  ctx.admin = std::make_unique<AdminGate>(admin.key, is_loopback_host(admin_host));
  if (!ctx.admin->has_key() && !ctx.admin->open()) {
    spdlog::warn(
        "the admin routes (/metrics, /stats, /dashboard, /prefixgate/explain) answer 403 on {}, "
        "which is not a loopback address: set PREFIXGATE_ADMIN_KEY (or admin_key:) to serve "
        "them with a key, or admin_listen: 127.0.0.1:PORT",
        admin_host);
  }

  auto port = s.http->start();
  if (!port) return port.error();
  if (!admin.host.empty()) {
    auto admin_port = s.http->add_listener(admin.host, admin.port, "admin_listen");
    if (!admin_port) return admin_port.error();
    s.admin_port = *admin_port;
  }
  s.followers = std::make_unique<KvEventFollowers>(ctx);
  if (Status st = s.followers->start(); !st) return st.error();
  if (ctx.config.peers.enabled()) {
    s.peers = std::make_unique<PeerLink>(*ctx.replicas, ctx.config.peers);
    auto peer_port = s.peers->start();
    if (!peer_port) return peer_port.error();
    s.peers->register_metrics(ctx.metrics);
    s.peer_port = *peer_port;
  }
  asio::co_spawn(asio::make_strand(ioc), run_stats_sampler(ctx), asio::detached);
  for (ReplicaId r = 0; r < ctx.config.upstreams.size(); ++r) {
    asio::co_spawn(asio::make_strand(ioc), run_health_checks(ctx, r), asio::detached);
    const ReplicaKind kind = ctx.config.upstreams[r].kind;
    if (kind == ReplicaKind::kPrefixgate) {
      asio::co_spawn(asio::make_strand(ioc), run_kv_events(ctx, r), asio::detached);
    } else if (has_kv_event_stream(kind)) {
      asio::co_spawn(asio::make_strand(ioc), run_load_scrape(ctx, r), asio::detached);
    }
  }
  return port;
}

std::uint16_t Gateway::admin_port() const {
  return impl_->admin_port;
}

std::uint16_t Gateway::peer_port() const {
  return impl_->peer_port;
}

void Gateway::request_shutdown() {
  if (impl_->http) impl_->http->request_shutdown();
}

void Gateway::run() {
  if (impl_->http) impl_->http->run();
  // Requests still queued belong to coroutines the io_context destroys: wake none of them.
  if (impl_->ctx.admission) impl_->ctx.admission->close();
  if (impl_->followers) impl_->followers->stop();
  if (impl_->peers) impl_->peers->stop();
}

}  // namespace prefixgate::gateway::server
