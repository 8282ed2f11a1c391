// The HTTP vocabulary the servers share: Beast message types, one client connection, and the
// helpers that write answers to it under the server's deadlines.
//
//   Awaitable<bool> handle(Connection& c, Request& req) {
//     Response res = make_response(req, http::status::ok, "application/json", body, keep_alive);
//     co_return co_await write_response(c, std::move(res)) && keep_alive;
//   }
//
// Every write runs under the connection's write deadline (ServerOptions::write_timeout) and
// reports false when the client is gone, so a handler never blocks on a reader that left.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "prefixgate/serving/request_body.h"

namespace prefixgate::serving {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

template <class T>
using Awaitable = asio::awaitable<T>;
using Request = http::request<RequestBody>;  // read without zero-filling (request_body.h)
using Response = http::response<http::string_body>;
using StreamHead = http::response<http::empty_body>;

// What an application keeps per client connection across its requests (reused buffers, say).
class ConnectionState {
 public:
  virtual ~ConnectionState() = default;
};

// One client connection. Lives on one of the server's threads; handlers use it from that thread
// only.
struct Connection {
  beast::tcp_stream stream;
  beast::flat_buffer buffer;                // bytes read past the current request
  std::string_view server_name;             // the Server header of every answer
  std::chrono::milliseconds write_timeout;  // per write
  std::unique_ptr<ConnectionState> state;   // the application's, see Handler::open()
  // The server's drain flag: answers written once it is set say `Connection: close`.
  const std::atomic<bool>* draining = nullptr;
  // Which listener accepted it: 0 the server's own, then HttpServer::add_listener's in order.
  std::size_t listener = 0;
  std::string head_scratch;  // the bytes of an answer's head, reused (write_message)
};

// The path of a request target, without the query string.
std::string_view path_of(std::string_view target);
// The value of query parameter `name` in `target`, nullopt when absent (no percent-decoding:
// the servers' parameters are numbers).
std::optional<std::string_view> query_param(std::string_view target, std::string_view name);

// A complete answer with the request's HTTP version and `keep_alive`.
Response make_response(const Request& req, http::status status, std::string content_type,
                       std::string body, bool keep_alive);

// Writes a complete answer (adding the Server header; `Connection: close` in a drain). False
// when the client is gone.
Awaitable<bool> write_response(Connection& c, Response res);

// A message's start line and fields and the blank line after them, appended to `out` byte for
// byte as Beast's serializer writes them. With the body beside it in one gathered write, this
// is the whole message without the serializer's per-buffer machinery, which cost more than
// the copy of the header it avoids.
void append_head(const http::request_header<>& head, std::string& out);
void append_head(const http::response_header<>& head, std::string& out);

// Writes `head` and then `body` with one gathered write (writev); `scratch` holds the head's
// bytes and keeps its capacity for the next message. `stream` must have its deadline set.
Awaitable<beast::error_code> write_message(beast::tcp_stream& stream,
                                           const http::request_header<>& head,
                                           std::string_view body, std::string& scratch);
Awaitable<beast::error_code> write_message(beast::tcp_stream& stream,
                                           const http::response_header<>& head,
                                           std::string_view body, std::string& scratch);

// A chunked stream: the head (status, content type, no-cache, Server), then chunks, then the
// last chunk. Each returns false when the client is gone.
StreamHead make_stream_head(const Request& req, http::status status, std::string_view content_type,
                            bool keep_alive);
Awaitable<bool> write_stream_head(Connection& c, StreamHead& head);
Awaitable<bool> write_chunk(Connection& c, std::string_view payload);
Awaitable<bool> write_last_chunk(Connection& c);

// Completes when the peer closes or resets the connection; cancelled by `||` when the work it
// races finishes first. Reads nothing a pipelined request could need: it waits for
// readability and stops at the first byte (a pipelining client is not a leaver).
Awaitable<void> watch_disconnect(tcp::socket& socket);

}  // namespace prefixgate::serving
