// The listener, the per-connection loop and the router.
//
// One coroutine per connection on its own strand (Beast's server-flex-awaitable pattern): read a
// request under the idle deadline with the body limit on the parser, route it, write the answer,
// repeat while keep-alive holds. Shutdown closes the acceptor, wakes idle connections so they
// close, lets busy ones finish their request, and gives up after drain_timeout.
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
#include <mutex>
#include <thread>

#include "prefixgate/canonicalize/json.h"
#include "server/http_common.h"

namespace prefixgate::engine::server {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string_view path_of(std::string_view target) {
  return target.substr(0, std::min(target.find('?'), target.size()));
}

std::string models_body(const ServerContext& ctx) {
  json::Object model{{"id", ctx.model.name},
                     {"object", "model"},
                     {"created", 0},
                     {"owned_by", "prefixgate"},
                     {"max_model_len", static_cast<double>(ctx.model.max_model_len)}};
  return json::to_json(json::Object{{"object", "list"}, {"data", json::Array{std::move(model)}}});
}

}  // namespace

Response make_response(const Request& req, http::status status, std::string content_type,
                       std::string body, bool keep_alive) {
  Response res{status, req.version()};
  res.set(http::field::server, "prefixgate-engine");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response error_response(const Request& req, const canon::Error& error, bool keep_alive) {
  return make_response(req, static_cast<http::status>(canon::http_status(error)),
                       "application/json", canon::openai_error_body(error), keep_alive);
}

Awaitable<bool> write_response(Connection& c, Response res) {
  c.stream.expires_after(c.ctx.options.write_timeout);
  auto [ec, n] = co_await http::async_write(c.stream, res, kTuple);
  (void)n;
  co_return !ec;
}

namespace {

// Routes one request; returns whether the connection stays open.
Awaitable<bool> route(Connection& c, const Request& req) {
  ServerContext& ctx = c.ctx;
  const bool keep_alive = req.keep_alive() && !ctx.draining.load();
  const std::string_view path = path_of(req.target());
  const auto allow = [&](http::verb verb) { return req.method() == verb; };
  const auto method_not_allowed = [&](const char* allowed) {
    Response res = make_response(
        req, http::status::method_not_allowed, "application/json",
        canon::openai_error_body(canon::make_error(
            canon::ErrorCode::kUnsupported,
            std::string("method ") + std::string(req.method_string()) + " is not allowed on " +
                std::string(path) + " (use " + allowed + ")")),
        keep_alive);
    res.set(http::field::allow, allowed);
    return res;
  };

  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!allow(http::verb::post)) co_return co_await write_response(c, method_not_allowed("POST"));
    ctx.observed.requests_total->add();
    const canon::Endpoint endpoint = path == "/v1/completions" ? canon::Endpoint::kCompletions
                                                               : canon::Endpoint::kChatCompletions;
    co_return co_await handle_generation(c, req, endpoint);
  }
  if (path == "/v1/kv_events") {
    if (!allow(http::verb::get)) co_return co_await write_response(c, method_not_allowed("GET"));
    co_return co_await handle_kv_events(c, req);
  }
  if (path == "/v1/models" || path == "/health" || path == "/metrics") {
    if (!allow(http::verb::get)) co_return co_await write_response(c, method_not_allowed("GET"));
    Response res;
    if (path == "/v1/models") {
      res = make_response(req, http::status::ok, "application/json", models_body(ctx), keep_alive);
    } else if (path == "/health") {
      const bool up = !ctx.draining.load();
      res = make_response(req, up ? http::status::ok : http::status::service_unavailable,
                          "application/json",
                          up ? R"({"status":"ok"})" : R"({"status":"draining"})", keep_alive);
    } else {
      res = make_response(req, http::status::ok, "text/plain; version=0.0.4", ctx.metrics->render(),
                          keep_alive);
    }
    co_return co_await write_response(c, std::move(res)) && keep_alive;
  }
  ctx.observed.request_errors_total->add();
  const canon::Error not_found =
      canon::make_error(canon::ErrorCode::kNotFound, "no route for " + std::string(path));
  Response res = error_response(req, not_found, keep_alive);
  co_return co_await write_response(c, std::move(res)) && keep_alive;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Server::Impl {
  // Declared first so it is destroyed last: coroutine frames and channels refer to it.
  asio::io_context ioc;
  asio::thread_pool blocking{1};
  std::unique_ptr<EngineLoop> engine;
  Metrics metrics;
  ServerContext ctx;
  asio::strand<asio::io_context::executor_type> accept_strand{ioc.get_executor()};
  tcp::acceptor acceptor{accept_strand};
  asio::signal_set signals{ioc};

  // Live connections, so a shutdown can wake the idle ones.
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

void Server::Impl::register_metrics() {
  EngineLoop* e = engine.get();
  const auto stat = [e](auto read) { return [e, read] { return read(e->stats()); }; };
  const std::string p = "prefixgate_engine_";
  metrics.callback(p + "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
                   "counter", stat([](const EngineStats& s) {
                     return static_cast<double>(s.scheduler.prompt_tokens_total);
                   }));
  metrics.callback(p + "prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
                   "counter", stat([](const EngineStats& s) {
                     return static_cast<double>(s.scheduler.cached_prompt_tokens_total);
                   }));
  metrics.callback(p + "kv_pages_used", "KV pages in use (sequences and cache).", "gauge",
                   stat([](const EngineStats& s) { return static_cast<double>(s.kv_pages_used); }));
  metrics.callback(
      p + "kv_pages_total", "KV pages in the pool.", "gauge",
      stat([](const EngineStats& s) { return static_cast<double>(s.kv_pages_total); }));
  metrics.callback(p + "kv_cache_usage_ratio", "Fraction of KV pages in use.", "gauge",
                   stat([](const EngineStats& s) {
                     return s.kv_pages_total == 0 ? 0.0
                                                  : static_cast<double>(s.kv_pages_used) /
                                                        static_cast<double>(s.kv_pages_total);
                   }));
  metrics.callback(
      p + "kv_pages_cached", "KV pages held by the prefix cache.", "gauge",
      stat([](const EngineStats& s) { return static_cast<double>(s.kv_pages_cached); }));
  metrics.callback(
      p + "num_requests_running", "Sequences running.", "gauge",
      stat([](const EngineStats& s) { return static_cast<double>(s.scheduler.running); }));
  metrics.callback(
      p + "num_requests_waiting", "Sequences waiting for admission.", "gauge",
      stat([](const EngineStats& s) { return static_cast<double>(s.scheduler.waiting); }));
  metrics.callback(p + "num_preemptions_total", "Sequences preempted (recompute).", "counter",
                   stat([](const EngineStats& s) {
                     return static_cast<double>(s.scheduler.preemptions_total);
                   }));
  metrics.callback(p + "prompt_tokens_total", "Prompt tokens of admitted requests.", "counter",
                   stat([](const EngineStats& s) {
                     return static_cast<double>(s.scheduler.prompt_tokens_total);
                   }));
  metrics.callback(
      p + "generation_tokens_total", "Tokens generated.", "counter",
      stat([](const EngineStats& s) { return static_cast<double>(s.generated_tokens_total); }));
  ctx.observed.requests_total = &metrics.counter(p + "requests_total", "Generation requests.");
  ctx.observed.request_errors_total =
      &metrics.counter(p + "request_errors_total", "Requests answered with an error status.");
  ctx.observed.ttft_seconds = &metrics.histogram(p + "time_to_first_token_seconds",
                                                 "Time to first token.", latency_buckets_seconds());
  ctx.observed.inter_token_seconds =
      &metrics.histogram(p + "inter_token_latency_seconds", "Time between generated tokens.",
                         latency_buckets_seconds());
  ctx.observed.e2e_seconds =
      &metrics.histogram(p + "e2e_request_latency_seconds",
                         "Request latency, arrival to last token.", latency_buckets_seconds());
}

Awaitable<void> Server::Impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), kTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    // Streams are many small writes (one SSE event per token): with Nagle on, each write after
    // the first waits for the peer's delayed ACK (up to 40 ms on Linux), which a client sees as
    // inter-token latency. The gateway sets the same on its sockets.
    beast::error_code nodelay_ec;
    socket.set_option(tcp::no_delay(true), nodelay_ec);
    asio::co_spawn(socket.get_executor(), session(std::move(socket)), asio::detached);
  }
}

Awaitable<void> Server::Impl::session(tcp::socket socket) {
  Connection c{beast::tcp_stream(std::move(socket)), {}, ctx};
  bool idle = false;
  std::uint64_t id;
  {
    std::lock_guard lock(mu);
    id = next_connection++;
    live[id] = Live{c.stream.get_executor(), &c.stream, &idle};
  }
  // A stream is written as small chunks, one per event: without TCP_NODELAY, Nagle holds each
  // one back until the previous is acknowledged, and a client that delays its ACKs (as Linux
  // does on a reused keep-alive connection) stalls every event by ~40 ms.
  beast::error_code nodelay_ec;
  c.stream.socket().set_option(tcp::no_delay(true), nodelay_ec);
  try {
    for (;;) {
      if (ctx.draining.load()) break;
      http::request_parser<http::string_body> parser;
      parser.body_limit(ctx.options.max_body_bytes);
      c.stream.expires_after(ctx.options.idle_timeout);
      idle = true;
      auto [ec, n] = co_await http::async_read(c.stream, c.buffer, parser, kTuple);
      (void)n;
      idle = false;
      if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
          ec == beast::error::timeout || ec == asio::error::connection_reset) {
        break;
      }
      if (ec) {
        // Malformed HTTP or a body over the limit: answer, then close (the rest of the
        // request is still on the wire).
        // (Built before the co_await: GCC 12 mishandles temporaries of a conditional
        // expression inside a co_await full-expression.)
        const canon::Error error =
            ec == http::error::body_limit
                ? canon::make_error(canon::ErrorCode::kTooLarge,
                                    "request body is larger than " +
                                        std::to_string(ctx.options.max_body_bytes) + " bytes")
                : canon::make_error(canon::ErrorCode::kInvalidValue,
                                    "malformed HTTP request: " + ec.message());
        Request bare;
        bare.version(11);
        Response res = error_response(bare, error, false);
        ctx.observed.request_errors_total->add();
        co_await write_response(c, std::move(res));
        break;
      }
      const Request req = parser.release();
      if (!co_await route(c, req)) break;
    }
  } catch (const std::exception& e) {
    spdlog::error("connection: {}", e.what());
  }
  beast::error_code ignored;
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  c.stream.close();
  {
    std::lock_guard lock(mu);
    live.erase(id);
  }
  cv.notify_all();
}

Server::Server(ServerOptions options, ServedModel model, EngineConfig engine_config,
               std::unique_ptr<Device> device)
    : impl_(std::make_unique<Impl>()) {
  impl_->engine = std::make_unique<EngineLoop>(std::move(engine_config), std::move(device));
  impl_->ctx.options = std::move(options);
  impl_->ctx.model = std::move(model);
  impl_->ctx.engine = impl_->engine.get();
  impl_->ctx.metrics = &impl_->metrics;
  impl_->ctx.blocking = &impl_->blocking;
  impl_->register_metrics();
}

Server::~Server() {
  // The engine goes before the io_context: its last sinks ring channels bound to it.
  impl_->engine.reset();
  impl_->blocking.join();
}

EngineLoop& Server::engine() {
  return *impl_->engine;
}

canon::Result<std::uint16_t> Server::start() {
  Impl& s = *impl_;
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.ctx.options.host, ec);
  if (ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue,
                             "bad host '" + s.ctx.options.host + "': " + ec.message(), "host");
  }
  const tcp::endpoint endpoint{address, s.ctx.options.port};
  if (s.acceptor.open(endpoint.protocol(), ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue, "socket: " + ec.message());
  }
  (void)s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (s.acceptor.bind(endpoint, ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue,
                             "cannot bind " + s.ctx.options.host + ":" +
                                 std::to_string(s.ctx.options.port) + ": " + ec.message(),
                             "port");
  }
  if (s.acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return canon::make_error(canon::ErrorCode::kInvalidValue, "listen: " + ec.message());
  }
  asio::co_spawn(s.accept_strand, s.accept_loop(), asio::detached);
  if (s.ctx.options.handle_signals) {
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

void Server::request_shutdown() {
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
    // On the connection's strand, so `idle` and the stream are not touched concurrently. The
    // entry cannot go away before this runs: erasing it happens on the same strand, later.
    asio::post(live.executor, [&s, id = id] {
      std::lock_guard inner(s.mu);
      auto it = s.live.find(id);
      if (it != s.live.end() && *it->second.idle) it->second.stream->cancel();
    });
  }
  s.cv.notify_all();
}

void Server::run() {
  Impl& s = *impl_;
  std::vector<std::thread> threads;
  auto work = asio::make_work_guard(s.ioc);
  for (std::size_t i = 0; i < std::max<std::size_t>(1, s.ctx.options.io_threads); ++i) {
    threads.emplace_back([&s] { s.ioc.run(); });
  }
  {
    std::unique_lock lock(s.mu);
    s.cv.wait(lock, [&] { return s.shutdown_requested; });
    if (!s.cv.wait_for(lock, s.ctx.options.drain_timeout, [&] { return s.live.empty(); })) {
      spdlog::warn("drain timeout: {} connections still open", s.live.size());
    }
  }
  work.reset();
  s.ioc.stop();
  for (std::thread& t : threads) t.join();
}

}  // namespace prefixgate::engine::server
