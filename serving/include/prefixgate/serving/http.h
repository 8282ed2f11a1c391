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

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
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
  // The request being answered came as HEAD, handed to the handler as GET: the write helpers
  // below send the answer's head alone (its Content-Length as for the GET), and write_chunk
  // fails, so that a stream ends at its head.
  bool head_only = false;
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

// A field value's optional whitespace (spaces and tabs) off both ends, as Beast trims it.
std::string_view trim_ows(std::string_view v);

// What Beast's `fields[name]` gives (the first field of that name's value, empty when none),
// found by each field's code in the head's list instead of by comparing names without case in
// Beast's tree: a head holds a handful of fields, and the tree's search cost ~500 instructions.
template <class Fields>
std::string_view field_value(const Fields& fields, http::field name) {
  for (const auto& f : fields) {
    if (f.name() == name) return std::string_view(f.value().data(), f.value().size());
  }
  return {};
}
// The same for a field Beast has no code for ("x-api-key"), its name compared without case.
template <class Fields>
std::string_view field_value(const Fields& fields, std::string_view name) {
  for (const auto& f : fields) {
    const auto n = f.name_string();
    if (n.size() == name.size() && beast::iequals(n, name)) {
      return std::string_view(f.value().data(), f.value().size());
    }
  }
  return {};
}

// A message head written as text by a request path that knows its fields: the bytes
// append_head() gives for a Beast header built by the same calls, without a Beast field (an
// allocation and a tree insertion each) per field. set() takes a field the head does not hold
// yet, and none of Connection, Content-Length and Transfer-Encoding (keep_alive() and
// prepare_payload() write those); its value is trimmed of spaces and tabs, as Beast trims.
//
//   HeadText head(scratch, http::status::ok, 11);      // Response res{http::status::ok, 11};
//   head.set(http::field::content_type, "text/plain");  // res.set(...);
//   head.keep_alive(false);                              // res.keep_alive(false);
//   head.prepare_payload(body.size());                   // res.prepare_payload();
//   head.end();                                          // append_head(res, scratch);
class HeadText {
 public:
  // Clears `out` and writes the request or status line into it; `out` must outlive this.
  HeadText(std::string& out, http::verb method, std::string_view target, unsigned version);
  HeadText(std::string& out, http::status status, unsigned version);

  void set(std::string_view name, std::string_view value);
  void set(http::field name, std::string_view value);
  // Beast's keep_alive(): Connection says what differs from the version's default, as the
  // head's last field so far, or goes.
  void keep_alive(bool keep_alive);
  bool keep_alive() const;
  // Beast's prepare_payload() for a body of `size` bytes: Content-Length (std::invalid_argument
  // where a body is not allowed).
  void prepare_payload(std::size_t size);
  // The blank line after the fields.
  void end() { out_ += "\r\n"; }
  std::string_view text() const { return out_; }

 private:
  std::string& out_;
  bool is_request_;
  http::verb method_ = http::verb::unknown;
  http::status status_ = http::status::unknown;
  unsigned version_;
  std::string_view connection_;    // the Connection field's value, "" when none
  std::size_t connection_at_ = 0;  // where its line starts in `out_`
};

// write_response() for a head written as text: adds the Server field and, in a drain,
// keep_alive(false), ends the head and writes it and `body`. The head's prepare_payload() is
// the caller's. False when the client is gone.
Awaitable<bool> write_response(Connection& c, HeadText& head, std::string_view body);

// Writes a message's head, already text, and its body with one gathered write (writev): what
// the socket's send buffer takes at once (most messages) without an asynchronous write, the
// rest with one. `stream` must have its deadline set.
Awaitable<beast::error_code> write_text(beast::tcp_stream& stream, std::string_view head,
                                        std::string_view body);
// write_text() in two steps, for a coroutine on a hot path that would rather not pay a frame
// for a call that almost always completes at once:
//   TextBuffers buffers{asio::buffer(head), asio::buffer(body)};
//   if (send_text_leaves_rest(stream, buffers, ec)) ec = co_await write_text_rest(stream, buffers);
// Up to 8 buffers (a head and a body in pieces); those left out are empty and skipped.
using TextBuffers = std::array<asio::const_buffer, 8>;
// Sends what the socket takes at once and drops it from `buffers`; true when some is left.
bool send_text_leaves_rest(beast::tcp_stream& stream, TextBuffers& buffers, beast::error_code& ec);
Awaitable<beast::error_code> write_text_rest(beast::tcp_stream& stream, TextBuffers buffers);

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
