// The engine's routes and its Server: the OpenAI API, Anthropic's Messages API, OpenAI's
// Responses API, /health, /metrics and /v1/kv_events over one EngineLoop, on the serving core's
// HttpServer (listener, limits, drain).
#include "server/server.h"

#include <boost/asio/thread_pool.hpp>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/serving/errors.h"
#include "server/http_common.h"
#include "server/kv_events_zmq.h"

namespace prefixgate::engine::server {
namespace {

std::string models_body(const ServerContext& ctx) {
  json::Object model{{"id", ctx.model.name},
                     {"object", "model"},
                     {"created", 0},
                     {"owned_by", "prefixgate"},
                     {"max_model_len", static_cast<double>(ctx.model.max_model_len)}};
  return json::to_json(json::Object{{"object", "list"}, {"data", json::Array{std::move(model)}}});
}

class EngineHandler : public serving::Handler {
 public:
  explicit EngineHandler(ServerContext& ctx) : ctx_(ctx) {}

  Awaitable<bool> handle(Connection& c, Request& req) override;
  void refused(Response&) override { ctx_.observed.request_errors_total->add(); }

 private:
  ServerContext& ctx_;
};

Awaitable<bool> EngineHandler::handle(Connection& c, Request& req) {
  ServerContext& ctx = ctx_;
  const bool keep_alive = req.keep_alive() && !ctx.draining();
  const std::string_view path = serving::path_of(req.target());
  const auto reply = [&](Response res) -> Awaitable<bool> {
    co_return co_await serving::write_response(c, std::move(res)) && keep_alive;
  };
  const auto method_not_allowed = [&](const char* allowed) {
    Response res = serving::error_response(
        req,
        make_error(ErrorCode::kUnsupported,
                   std::string("method ") + std::string(req.method_string()) +
                       " is not allowed on " + std::string(path) + " (use " + allowed + ")"),
        keep_alive);
    res.result(http::status::method_not_allowed);
    res.set(http::field::allow, allowed);
    return res;
  };

  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method() != http::verb::post) co_return co_await reply(method_not_allowed("POST"));
    ctx.observed.requests_total->add();
    const canon::Endpoint endpoint = path == "/v1/completions" ? canon::Endpoint::kCompletions
                                                               : canon::Endpoint::kChatCompletions;
    co_return co_await handle_generation(c, ctx, req, endpoint);
  }
  if (path == "/v1/messages" || path == "/v1/responses") {
    if (req.method() != http::verb::post) co_return co_await reply(method_not_allowed("POST"));
    ctx.observed.requests_total->add();
    co_return co_await handle_agent_api(
        c, ctx, req, path == "/v1/messages" ? canon::Api::kMessages : canon::Api::kResponses);
  }
  if (path == "/v1/kv_events") {
    if (req.method() != http::verb::get) co_return co_await reply(method_not_allowed("GET"));
    co_return co_await handle_kv_events(c, ctx, req);
  }
  if (path == "/v1/models" || path == "/health" || path == "/metrics") {
    if (req.method() != http::verb::get) co_return co_await reply(method_not_allowed("GET"));
    if (path == "/v1/models") {
      co_return co_await reply(serving::make_response(req, http::status::ok, "application/json",
                                                      models_body(ctx), keep_alive));
    }
    if (path == "/health") {
      const bool up = !ctx.draining();
      co_return co_await reply(serving::make_response(
          req, up ? http::status::ok : http::status::service_unavailable, "application/json",
          up ? R"({"status":"ok"})" : R"({"status":"draining"})", keep_alive));
    }
    co_return co_await reply(serving::make_response(
        req, http::status::ok, "text/plain; version=0.0.4", ctx.metrics->render(), keep_alive));
  }
  ctx.observed.request_errors_total->add();
  co_return co_await reply(serving::error_response(
      req, make_error(ErrorCode::kNotFound, "no route for " + std::string(path)), keep_alive));
}

}  // namespace

struct Server::Impl {
  // The engine goes first in ~Server (its last sinks ring channels bound to the server's
  // io_context); the HTTP server, declared before the engine, outlives it.
  ServerContext ctx;
  serving::Metrics metrics;
  EngineHandler handler{ctx};
  std::unique_ptr<serving::HttpServer> http;
  asio::thread_pool blocking{1};
  std::unique_ptr<EngineLoop> engine;
  std::unique_ptr<ZmqKvEvents> zmq_events;  // follows the engine's log: destroyed before it
};

Server::Server(ServerOptions options, ServedModel model, EngineConfig engine_config,
               std::unique_ptr<Device> device)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.engine = std::make_unique<EngineLoop>(std::move(engine_config), std::move(device));
  s.http = std::make_unique<serving::HttpServer>(options.http, s.handler);
  s.ctx.options = std::move(options);
  s.ctx.model = std::move(model);
  s.ctx.engine = s.engine.get();
  s.ctx.metrics = &s.metrics;
  s.ctx.blocking = &s.blocking;
  s.ctx.http = s.http.get();
  register_engine_metrics(s.ctx);
}

Server::~Server() {
  impl_->zmq_events.reset();
  impl_->engine.reset();
  impl_->blocking.join();
}

EngineLoop& Server::engine() {
  return *impl_->engine;
}

Result<std::uint16_t> Server::start() {
  auto port = impl_->http->start();
  if (!port) return port;
  const ServerOptions& o = impl_->ctx.options;
  if (!o.kv_events_endpoint.empty()) {
    auto events =
        ZmqKvEvents::start(*impl_->engine, {.endpoint = o.kv_events_endpoint,
                                            .replay_endpoint = o.kv_events_replay_endpoint,
                                            .buffer_batches = o.kv_events_buffer_batches});
    if (!events) return events.error();
    impl_->zmq_events = std::move(*events);
  }
  return port;
}

std::string Server::kv_events_endpoint() const {
  return impl_->zmq_events ? impl_->zmq_events->endpoint() : std::string();
}

std::string Server::kv_events_replay_endpoint() const {
  return impl_->zmq_events ? impl_->zmq_events->replay_endpoint() : std::string();
}

void Server::request_shutdown() {
  impl_->http->request_shutdown();
}

void Server::run() {
  impl_->http->run();
}

}  // namespace prefixgate::engine::server
