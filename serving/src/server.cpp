// The listener, the per-connection loop and the drain (see server.h for the behaviour).
#include "prefixgate/serving/server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "prefixgate/serving/errors.h"
#include "prefixgate/serving/socket_deadline.h"
#include "prefixgate/serving/socket_io.h"
#include "request_reader.h"

namespace prefixgate::serving {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The ways a client ends a connection between requests: not errors, nothing to answer.
bool is_quiet_close(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::operation_aborted || ec == beast::error::timeout ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

struct Refusal {
  http::status status;
  std::string message;
  std::string code;
};

// Beast decodes `chunked` wherever a Transfer-Encoding lists it and takes the rest as the body's
// coding; the servers decode no other coding, and a proxy must not guess where a body ends
// (RFC 9112 section 6.1): anything but a single `chunked` is refused. (Content-Length together
// with Transfer-Encoding, and conflicting Content-Lengths, Beast refuses itself: 400.)
std::optional<Refusal> unsupported_transfer_coding(const Request& req) {
  const auto count = req.count(http::field::transfer_encoding);
  if (count == 0) return std::nullopt;
  const std::string_view te = req[http::field::transfer_encoding];
  if (count == 1 && beast::iequals(te, "chunked")) return std::nullopt;
  // The codings in order, lower-cased: chunked anywhere but last leaves no way to find the
  // body's end (400); chunked after another coding is well-formed but not one we decode (501).
  std::vector<std::string> codings(1);
  for (const char ch : te) {
    if (ch == ',') {
      codings.emplace_back();
    } else if (ch != ' ' && ch != '\t') {
      codings.back() += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
  }
  const bool chunked_not_last =
      std::find(codings.begin(), codings.end() - 1, "chunked") != codings.end() - 1;
  if (count > 1 || chunked_not_last || codings.back().empty()) {
    return Refusal{http::status::bad_request,
                   "malformed HTTP request: chunked must be the last transfer coding, once",
                   "bad_request"};
  }
  return Refusal{http::status::not_implemented,
                 "transfer coding '" + std::string(te.substr(0, 64)) + "' is not supported",
                 "unsupported_transfer_coding"};
}

// A compressed request body: neither server decodes one, and parsed as it is, it read as
// "bytes that are not UTF-8", which says nothing of the cause. 415 names the coding (RFC 9110
// section 15.5.16); the answer's Accept-Encoding says what is taken (refuse()).
std::optional<Refusal> unsupported_content_coding(const Request& req) {
  const std::string_view ce = req[http::field::content_encoding];
  if (req.count(http::field::content_encoding) == 0 || beast::iequals(ce, "identity")) {
    return std::nullopt;
  }
  return Refusal{http::status::unsupported_media_type,
                 "content coding '" + std::string(ce.substr(0, 64)) +
                     "' is not supported: send the request body uncompressed",
                 "unsupported_content_encoding"};
}

}  // namespace

std::unique_ptr<ConnectionState> Handler::open(Connection&) {
  return nullptr;
}

void Handler::refused(Response&) {}

// One io_context per thread, each run by its own thread (as nginx runs one event loop per
// worker): a connection lives on one of them for its whole life, so its coroutine, its timers
// and its sockets are never touched by two threads at once without a strand, whose dispatch
// (a mutex and a queue per handler) cost more than the rest of the proxy's bookkeeping.
std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  // Concurrency hint 1: one thread runs each, which lets Asio skip its multi-thread wakeups.
  for (std::size_t i = 0; i < threads; ++i)
    contexts.push_back(std::make_unique<asio::io_context>(1));
  return contexts;
}

struct HttpServer::Impl {
  Impl(ServerOptions o, Handler& h)
      : options(std::move(o)), handler(h), contexts(make_contexts(options.threads)) {}

  ServerOptions options;
  Handler& handler;
  // Declared before what refers to them, so they are destroyed after them. The first also
  // runs the acceptors, the signals and the application's background coroutines.
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  asio::io_context& ioc = *contexts.front();
  std::atomic<std::size_t> next_context{0};
  asio::strand<asio::io_context::executor_type> accept_strand{ioc.get_executor()};
  tcp::acceptor acceptor{accept_strand};
  // add_listener's, in order (Connection::listener 1, 2, ...); a list, so they never move.
  std::list<tcp::acceptor> extra_acceptors;
  asio::signal_set signals{ioc};
  std::atomic<bool> draining{false};

  // Live connections, so a shutdown can wake the idle ones.
  struct Live {
    asio::any_io_executor executor;
    beast::tcp_stream* stream = nullptr;
    bool* idle = nullptr;  // touched on the connection's thread only
  };
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, Live> live;
  std::uint64_t next_connection = 0;
  bool shutdown_requested = false;

  // Binds and listens on host:port; errors name `param`.
  Status bind(tcp::acceptor& a, const std::string& host, std::uint16_t port,
              const std::string& param);
  Awaitable<void> accept_loop(tcp::acceptor& a, std::size_t listener);
  Awaitable<void> session(tcp::socket socket, std::size_t listener);
  // `target`: the refused request's, when its header was read (the error body's shape follows
  // its path: errors.h).
  Awaitable<void> refuse(Connection& c, http::status status, std::string_view message,
                         std::string_view code, std::string_view target = {});
  Awaitable<void> linger(Connection& c);
};

Status HttpServer::Impl::bind(tcp::acceptor& a, const std::string& host, std::uint16_t port,
                              const std::string& param) {
  const auto fail = [&](std::string message) {
    return make_error(ErrorCode::kInvalidValue, std::move(message), param);
  };
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return fail(param + ": bad host '" + host + "': " + ec.message());
  const tcp::endpoint endpoint{address, port};
  if (a.open(endpoint.protocol(), ec); ec) return fail("socket: " + ec.message());
  (void)a.set_option(asio::socket_base::reuse_address(true), ec);
  if (a.bind(endpoint, ec); ec) {
    return fail(param + ": cannot bind " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  if (a.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return fail(param + ": " + ec.message());
  }
  return {};
}

Awaitable<void> HttpServer::Impl::accept_loop(tcp::acceptor& a, std::size_t listener) {
  for (;;) {
    // Connections are dealt to the threads in turn.
    asio::io_context& home = *contexts[next_context.fetch_add(1) % contexts.size()];
    auto [ec, socket] = co_await a.async_accept(home.get_executor(), kTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !a.is_open()) co_return;
      spdlog::warn("accept: {}", ec.message());
      continue;
    }
    asio::co_spawn(socket.get_executor(), session(std::move(socket), listener), asio::detached);
  }
}

Awaitable<void> HttpServer::Impl::refuse(Connection& c, http::status status,
                                         std::string_view message, std::string_view code,
                                         std::string_view target) {
  Request bare;
  bare.version(11);
  bare.target(target);
  Response res = error_response(bare, status, message, code, false);
  if (status == http::status::unsupported_media_type)
    res.set(http::field::accept_encoding, "identity");
  handler.refused(res);
  co_await write_response(c, std::move(res));
}

// Reads and drops what the client is still sending, briefly, before the close: closing with
// unread data makes the kernel send a reset, which can destroy the answer in flight.
Awaitable<void> HttpServer::Impl::linger(Connection& c) {
  beast::error_code ignored;
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  std::vector<char> sink(64 * 1024);
  c.stream.expires_after(options.linger_timeout);
  for (std::size_t drained = 0; drained < (256u << 20);) {
    auto [ec, got] = co_await c.stream.async_read_some(asio::buffer(sink), kTuple);
    if (ec) break;
    drained += got;
  }
}

Awaitable<void> HttpServer::Impl::session(tcp::socket socket, std::size_t listener) {
  Connection c{beast::tcp_stream(std::move(socket)),
               {},
               options.server_name,
               options.write_timeout,
               nullptr,
               &draining,
               listener,
               {},
               false};
  bool idle = false;
  std::uint64_t id;
  bool over_limit;
  {
    std::lock_guard lock(mu);
    id = next_connection++;
    over_limit = live.size() >= options.max_connections;
    live[id] = Live{c.stream.get_executor(), &c.stream, &idle};
  }
  beast::error_code ignored;
  // Streams are many small writes (one event per token): with Nagle on, each write after the
  // first waits for the peer's delayed ACK (up to 40 ms on Linux).
  c.stream.socket().set_option(tcp::no_delay(true), ignored);
  // Reads are sized by the buffer's free capacity (512 bytes when empty): room for a typical
  // request in one read instead of a system call per 512 bytes, and for a larger one once the
  // connection has sent one (ReadSizer).
  ReadSizer read_size;
  c.buffer.reserve(read_size.next());
  // The idle deadline between requests, then the request's own from its first byte.
  SocketDeadline deadline(c.stream.get_executor());
  try {
    if (over_limit) {
      co_await refuse(c, http::status::service_unavailable, "too many connections",
                      "too_many_connections");
    } else {
      c.state = handler.open(c);
    }
    while (!over_limit && !draining.load()) {
      c.head_only = false;  // a refusal below is answered whole, whatever came before
      RequestParser parser;
      parser.body_limit(options.max_body_bytes);
      parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
      idle = true;
      if (c.buffer.size() == 0) {
        // Between requests: the next request's first bytes, under the idle deadline. A read
        // on the socket itself, not the stream: the stream would start and cancel a timer for
        // it. Asio (1.26) tries the read at once: it takes a socket for drained only at the end
        // of the stream, not after a short read as nginx does. So when the client sends its next
        // request a round trip after our answer, this read finds nothing (EAGAIN) before Asio
        // waits for readiness; waiting first (async_wait) would cost an epoll_ctl instead.
        deadline.arm(c.stream.socket(), options.idle_timeout);
        auto [read_ec, got] =
            co_await c.stream.socket().async_read_some(c.buffer.prepare(read_size.next()), kTuple);
        deadline.disarm();
        // The idle deadline, a shutdown, or the client left: closed quietly.
        if (read_ec) break;
        c.buffer.commit(got);
      }
      // The header, then (once it is known to be one this server takes) the body; a request
      // that arrived whole is parsed without a wait (request_reader.h).
      RequestReader reader(c, deadline, options.request_timeout, read_size.next());
      beast::error_code ec;
      if (!reader.header_buffered(parser, ec) && !ec) ec = co_await reader.header(parser);
      std::optional<Refusal> refusal;
      if (!ec) refusal = unsupported_transfer_coding(parser.get());
      if (!ec && !refusal) refusal = unsupported_content_coding(parser.get());
      if (!ec && !refusal && !reader.body_buffered(parser, options.max_body_bytes, ec) && !ec) {
        if (RequestReader::expects_continue(parser.get())) ec = co_await reader.send_continue();
        if (!ec) ec = co_await reader.body(parser, options.max_body_bytes);
      }
      reader.finish();
      idle = false;
      if (reader.timed_out()) {
        co_await refuse(c, http::status::request_timeout,
                        "the request did not arrive within " +
                            std::to_string(options.request_timeout.count()) + " ms",
                        "request_timeout", parser.get().target());
        co_await linger(c);
        break;
      }
      if (is_quiet_close(ec)) break;
      if (refusal) {
        co_await refuse(c, refusal->status, refusal->message, refusal->code, parser.get().target());
        co_await linger(c);
        break;
      }
      if (ec) {
        // Malformed HTTP or over a limit: answer, then close (the rest is still on the wire).
        // The request line's target, when it was read before the error (empty otherwise).
        const std::string target(parser.get().target());
        if (ec == http::error::body_limit) {
          co_await refuse(
              c, http::status::payload_too_large,
              "request body is larger than " + std::to_string(options.max_body_bytes) + " bytes",
              "request_too_large", target);
        } else if (ec == http::error::header_limit) {
          co_await refuse(c, http::status::request_header_fields_too_large,
                          "request headers are larger than " +
                              std::to_string(options.max_header_bytes) + " bytes",
                          "request_headers_too_large");
        } else {
          co_await refuse(c, http::status::bad_request, "malformed HTTP request: " + ec.message(),
                          "bad_request", target);
        }
        co_await linger(c);
        break;
      }
      Request req = parser.release();
      read_size.saw(req.body().size());
      // HEAD is GET without the body (RFC 9110 section 9.3.2): load balancers check health with
      // it. The handler answers a GET; the writes leave the body out (Connection::head_only).
      c.head_only = req.method() == http::verb::head;
      if (c.head_only) req.method(http::verb::get);
      if (!co_await handler.handle(c, req)) break;
    }
  } catch (const std::exception& e) {
    spdlog::error("connection: {}", e.what());
  }
  c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  c.stream.close();
  c.state.reset();
  {
    std::lock_guard lock(mu);
    live.erase(id);
  }
  cv.notify_all();
}

HttpServer::HttpServer(ServerOptions options, Handler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

HttpServer::~HttpServer() = default;

Result<std::uint16_t> HttpServer::start() {
  Impl& s = *impl_;
  const ServerOptions& o = s.options;
  if (Status st = s.bind(s.acceptor, o.host, o.port, "listen"); !st) return st.error();
  asio::co_spawn(s.accept_strand, s.accept_loop(s.acceptor, 0), asio::detached);
  if (o.handle_signals) {
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

Result<std::uint16_t> HttpServer::add_listener(const std::string& host, std::uint16_t port,
                                               const std::string& param) {
  Impl& s = *impl_;
  tcp::acceptor& a = s.extra_acceptors.emplace_back(s.accept_strand);
  if (Status st = s.bind(a, host, port, param); !st) {
    s.extra_acceptors.pop_back();
    return st.error();
  }
  asio::co_spawn(s.accept_strand, s.accept_loop(a, s.extra_acceptors.size()), asio::detached);
  return a.local_endpoint().port();
}

void HttpServer::request_shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.shutdown_requested) return;
    s.shutdown_requested = true;
  }
  s.draining.store(true);
  asio::post(s.accept_strand, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    for (tcp::acceptor& a : s.extra_acceptors) a.close(ec);
    s.signals.cancel();
  });
  std::lock_guard lock(s.mu);
  for (auto& [id, live] : s.live) {
    // On the connection's thread, so `idle` and the stream are not touched concurrently. The
    // entry cannot go away before this runs: erasing it happens on the same thread, later.
    asio::post(live.executor, [&s, id = id] {
      std::lock_guard inner(s.mu);
      auto it = s.live.find(id);
      if (it != s.live.end() && *it->second.idle) it->second.stream->cancel();
    });
  }
  s.cv.notify_all();
}

void HttpServer::run() {
  Impl& s = *impl_;
  std::vector<std::thread> threads;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  for (auto& context : s.contexts) {
    work.push_back(asio::make_work_guard(*context));
    threads.emplace_back([&ioc = *context] { ioc.run(); });
  }
  {
    std::unique_lock lock(s.mu);
    s.cv.wait(lock, [&] { return s.shutdown_requested; });
    if (!s.cv.wait_for(lock, s.options.drain_timeout, [&] { return s.live.empty(); })) {
      spdlog::warn("drain timeout: {} connections still open", s.live.size());
    }
  }
  for (auto& guard : work) guard.reset();
  for (auto& context : s.contexts) context->stop();
  for (std::thread& t : threads) t.join();
}

bool HttpServer::draining() const {
  return impl_->draining.load();
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->live.size();
}

const ServerOptions& HttpServer::options() const {
  return impl_->options;
}

asio::io_context& HttpServer::io_context() {
  return impl_->ioc;
}

}  // namespace prefixgate::serving
