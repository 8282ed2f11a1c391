// The HTTP/1.1 server both prefixgate (the gateway) and prefixgate-engine run: a listener, one
// coroutine per connection, limits, and a graceful drain, given a Handler that answers requests.
//
//   class App : public serving::Handler {
//     Awaitable<bool> handle(Connection& c, Request& req) override { ... }
//   };
//   App app;
//   serving::HttpServer server(options, app);
//   auto port = server.start();           // binds; port 0 picks a free one
//   if (!port) return fail(port.error());
//   std::thread t([&] { server.run(); });  // serves until request_shutdown(), then drains
//   server.request_shutdown();
//   t.join();
//
// Threads: one event loop (io_context) per thread; connections are dealt to them in turn and
// stay on one for life, so nothing a connection owns needs a lock or a strand.
//
// Per connection (Beast's server-flex-awaitable pattern, on its thread's event loop): read
// a request under the idle deadline with body and header limits on the parser, hand it to the
// Handler, repeat while it keeps the connection. What the server answers itself:
//   - over max_connections: 503 and close, without reading;
//   - a body over max_body_bytes: 413; headers over max_header_bytes: 431; malformed HTTP: 400;
//     a request whose last byte has not arrived request_timeout after its first: 408;
//     each followed by a lingering close (what the client is still sending is read and dropped
//     for up to linger_timeout, so it sees the answer rather than a reset: RFC 9112 section 9.6);
//   - end of stream, a reset or the idle deadline between requests: closed quietly.
// Read deadlines: idle_timeout until a request's first byte, then request_timeout until its
// last, so a client that dribbles its headers or body a byte at a time is bounded. They run
// behind one lazy timer per connection (socket_deadline.h), so a keep-alive request starts and
// cancels none. A request that arrives whole in its first read is parsed where it lies
// (socket_io.h); the read has room for 16 KB, or for as much as the connection's last request
// up to 64 KB (ReadSizer), so that an agent's growing conversation comes in one read. Answers
// go out with one non-blocking write when the socket takes them.
// Shutdown (request_shutdown(), or SIGINT/SIGTERM with handle_signals): stop accepting, close
// idle connections, let busy ones finish their request (draining() turns keep-alive off), give
// up after drain_timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/serving/http.h"
#include "prefixgate/serving/options.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace prefixgate::serving {

// What a server does with requests. One Handler serves every connection, concurrently.
class Handler {
 public:
  virtual ~Handler() = default;
  // State for a new connection, kept across its requests (Connection::state).
  virtual std::unique_ptr<ConnectionState> open(Connection& c);
  // Answers one request. Returns whether the connection stays open for the next one.
  // Exceptions are caught and logged by the server (the connection closes); don't rely on it.
  virtual Awaitable<bool> handle(Connection& c, Request& req) = 0;
  // An answer the server gives itself (limits, malformed HTTP, too many connections), before
  // it is written: a place to count it or add headers.
  virtual void refused(Response& res);
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, Handler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens. Returns the bound port. Errors (bad host, port in use): kInvalidValue
  // with param "listen".
  Result<std::uint16_t> start();
  // Binds one more listener on the same threads, handler and limits (after start(), before
  // run()). Its connections carry Connection::listener = 1, 2, ... in the order added, so the
  // handler can serve other routes there (the gateway's admin_listen). Returns the bound port;
  // errors as start()'s, with param `param`.
  Result<std::uint16_t> add_listener(const std::string& host, std::uint16_t port,
                                     const std::string& param);
  // Serves on `threads` threads until a shutdown request, then drains and returns.
  void run();
  // Any thread (or a signal when handle_signals): stop accepting, let in-flight requests
  // finish up to drain_timeout, then make run() return. Idempotent.
  void request_shutdown();

  // True once a shutdown was requested: handlers stop keep-alive and end long streams.
  bool draining() const;
  std::size_t open_connections() const;
  const ServerOptions& options() const;
  // For the application's background coroutines (health checks, event followers): they run on
  // the server's threads and stop when it stops.
  asio::io_context& io_context();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixgate::serving
