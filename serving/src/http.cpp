#include "prefixgate/serving/http.h"

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <stdexcept>

#include "prefixgate/serving/socket_io.h"

namespace prefixgate::serving {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

void append_version(unsigned version, std::string& out) {
  out += "HTTP/";
  out += static_cast<char>('0' + version / 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
}

void append_fields(const http::fields& fields, std::string& out) {
  for (const auto& field : fields) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
}

template <class Head>
Awaitable<beast::error_code> write_head_and_body(beast::tcp_stream& stream, const Head& head,
                                                 std::string_view body, std::string& scratch) {
  scratch.clear();
  append_head(head, scratch);
  return write_text(stream, scratch, body);
}

void append_status_line(unsigned version, unsigned status, std::string_view reason,
                        std::string& out) {
  append_version(version, out);
  out += ' ';
  out += static_cast<char>('0' + status / 100 % 10);
  out += static_cast<char>('0' + status / 10 % 10);
  out += static_cast<char>('0' + status % 10);
  out += ' ';
  out += reason;
  out += "\r\n";
}

// Sends what the socket's send buffer takes of `buffers` at once and drops it from them.
// Returns whether anything is left for write_rest(). Most messages and stream chunks fit: they
// skip the asynchronous write, and the coroutine frame a call to write_rest() would cost.
template <std::size_t N>
bool send_leaves_rest(beast::tcp_stream& stream, std::array<asio::const_buffer, N>& buffers,
                      beast::error_code& ec) {
  std::size_t sent = send_now(stream.socket(), buffers, ec);
  if (ec) return false;
  std::size_t left = 0;
  for (asio::const_buffer& b : buffers) {
    const std::size_t taken = std::min(sent, b.size());
    b += taken;
    sent -= taken;
    left += b.size();
  }
  return left > 0;
}

// Writes what is left of `buffers` under the stream's deadline.
template <std::size_t N>
Awaitable<beast::error_code> write_rest(beast::tcp_stream& stream,
                                        std::array<asio::const_buffer, N> buffers) {
  auto [ec, n] = co_await asio::async_write(stream, buffers, kTuple);
  (void)n;
  co_return ec;
}

}  // namespace

std::string_view trim_ows(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool send_text_leaves_rest(beast::tcp_stream& stream, TextBuffers& buffers, beast::error_code& ec) {
  return send_leaves_rest(stream, buffers, ec);
}

Awaitable<beast::error_code> write_text_rest(beast::tcp_stream& stream, TextBuffers buffers) {
  return write_rest(stream, buffers);
}

Awaitable<beast::error_code> write_text(beast::tcp_stream& stream, std::string_view head,
                                        std::string_view body) {
  TextBuffers buffers{asio::buffer(head.data(), head.size()),
                      asio::buffer(body.data(), body.size())};
  beast::error_code ec;
  if (send_leaves_rest(stream, buffers, ec)) ec = co_await write_rest(stream, buffers);
  co_return ec;
}

HeadText::HeadText(std::string& out, http::verb method, std::string_view target, unsigned version)
    : out_(out), is_request_(true), method_(method), version_(version) {
  out_.clear();
  out_ += http::to_string(method);
  out_ += ' ';
  out_ += target;
  out_ += ' ';
  append_version(version, out_);
  out_ += "\r\n";
}

HeadText::HeadText(std::string& out, http::status status, unsigned version)
    : out_(out), is_request_(false), status_(status), version_(version) {
  out_.clear();
  append_status_line(version, static_cast<unsigned>(status), http::obsolete_reason(status), out_);
}

void HeadText::set(std::string_view name, std::string_view value) {
  value = trim_ows(value);
  // One growth and plain copies, not four appends each checking the capacity: a dozen fields a
  // request come through here.
  const std::size_t at = out_.size();
  out_.resize(at + name.size() + value.size() + 4);
  char* p = std::copy(name.begin(), name.end(), out_.data() + at);
  *p++ = ':';
  *p++ = ' ';
  p = std::copy(value.begin(), value.end(), p);
  *p++ = '\r';
  *p = '\n';
}

void HeadText::set(http::field name, std::string_view value) {
  set(std::string_view(http::to_string(name)), value);
}

void HeadText::keep_alive(bool keep_alive) {
  // From no Connection field, "close" or "keep-alive" (the only values written here), Beast
  // arrives at the same value whatever the one before: the version's exception, or none.
  const std::string_view value =
      version_ < 11 ? (keep_alive ? "keep-alive" : "") : (keep_alive ? "" : "close");
  if (!connection_.empty()) {
    const std::size_t end = out_.find("\r\n", connection_at_) + 2;
    out_.erase(connection_at_, end - connection_at_);
  }
  connection_ = value;
  if (value.empty()) return;
  connection_at_ = out_.size();
  set(http::field::connection, value);
}

bool HeadText::keep_alive() const {
  return version_ < 11 ? connection_ == "keep-alive" : connection_ != "close";
}

void HeadText::prepare_payload(std::size_t size) {
  if (is_request_) {
    if (method_ == http::verb::trace && size > 0) {
      throw std::invalid_argument("invalid request body");
    }
    if (size == 0 && method_ != http::verb::options && method_ != http::verb::put &&
        method_ != http::verb::post) {
      return;  // no Transfer-Encoding to take chunked off
    }
  } else if (size > 0 &&
             (status_ == http::status::no_content || status_ == http::status::not_modified)) {
    // Beast refuses these two; its test for 1xx compares the status itself with the class
    // (status_class(result())), which no status equals, so a 1xx with a body passes.
    throw std::invalid_argument("invalid response body");
  }
  char digits[24];
  set(http::field::content_length,
      std::string_view(digits, std::to_chars(digits, digits + sizeof digits, size).ptr));
}

Awaitable<bool> write_response(Connection& c, HeadText& head, std::string_view body) {
  head.set(http::field::server, c.server_name);
  if (c.draining && c.draining->load()) head.keep_alive(false);
  head.end();
  const std::string_view text = head.text();
  if (c.head_only) body = {};
  TextBuffers buffers{asio::buffer(text.data(), text.size()),
                      asio::buffer(body.data(), body.size())};
  beast::error_code ec;
  if (send_leaves_rest(c.stream, buffers, ec)) {
    // The write timeout starts only for a write that waits, as write_chunk's.
    c.stream.expires_after(c.write_timeout);
    ec = co_await write_rest(c.stream, buffers);
  }
  co_return !ec;
}

void append_head(const http::request_header<>& head, std::string& out) {
  out += head.method_string();
  out += ' ';
  out += head.target();
  out += ' ';
  append_version(head.version(), out);
  out += "\r\n";
  append_fields(head, out);
}

void append_head(const http::response_header<>& head, std::string& out) {
  append_status_line(head.version(), head.result_int(), head.reason(), out);
  append_fields(head, out);
}

Awaitable<beast::error_code> write_message(beast::tcp_stream& stream,
                                           const http::request_header<>& head,
                                           std::string_view body, std::string& scratch) {
  return write_head_and_body(stream, head, body, scratch);
}

Awaitable<beast::error_code> write_message(beast::tcp_stream& stream,
                                           const http::response_header<>& head,
                                           std::string_view body, std::string& scratch) {
  return write_head_and_body(stream, head, body, scratch);
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, std::min(target.find('?'), target.size()));
}

std::optional<std::string_view> query_param(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

Response make_response(const Request& req, http::status status, std::string content_type,
                       std::string body, bool keep_alive) {
  Response res{status, req.version()};
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Awaitable<bool> write_response(Connection& c, Response res) {
  res.set(http::field::server, c.server_name);
  if (c.draining && c.draining->load()) res.keep_alive(false);
  c.stream.expires_after(c.write_timeout);
  const std::string_view body = c.head_only ? std::string_view() : std::string_view(res.body());
  const beast::error_code ec = co_await write_message(c.stream, res, body, c.head_scratch);
  co_return !ec;
}

StreamHead make_stream_head(const Request& req, http::status status, std::string_view content_type,
                            bool keep_alive) {
  StreamHead head{status, req.version()};
  head.set(http::field::content_type, content_type);
  head.set(http::field::cache_control, "no-cache");
  head.keep_alive(keep_alive);
  head.chunked(true);
  return head;
}

Awaitable<bool> write_stream_head(Connection& c, StreamHead& head) {
  head.set(http::field::server, c.server_name);
  if (c.draining && c.draining->load()) head.keep_alive(false);
  http::response_serializer<http::empty_body> serializer{head};
  c.stream.expires_after(c.write_timeout);
  auto [ec, n] = co_await http::async_write_header(c.stream, serializer, kTuple);
  (void)n;
  co_return !ec;
}

Awaitable<bool> write_chunk(Connection& c, std::string_view payload) {
  if (c.head_only) co_return false;     // the head was the whole answer
  if (payload.empty()) co_return true;  // an empty chunk would end the stream
  // The chunk's size line, its data and its CRLF: the bytes Beast's make_chunk() writes.
  char size_line[24];
  char* end = std::to_chars(size_line, size_line + 16, payload.size(), 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  std::array<asio::const_buffer, 3> buffers{
      asio::buffer(size_line, static_cast<std::size_t>(end - size_line)),
      asio::buffer(payload.data(), payload.size()), asio::buffer("\r\n", 2)};
  beast::error_code ec;
  if (send_leaves_rest(c.stream, buffers, ec)) {
    // The write timeout starts only for a write that waits: setting it cancels the stream's
    // timer, work a streamed answer's events, which the socket almost always takes at once,
    // would otherwise pay one by one.
    c.stream.expires_after(c.write_timeout);
    ec = co_await write_rest(c.stream, buffers);
  }
  co_return !ec;
}

Awaitable<bool> write_last_chunk(Connection& c) {
  if (c.head_only) co_return true;
  std::array<asio::const_buffer, 1> buffers{asio::buffer("0\r\n\r\n", 5)};
  beast::error_code ec;
  if (send_leaves_rest(c.stream, buffers, ec)) {
    c.stream.expires_after(c.write_timeout);
    ec = co_await write_rest(c.stream, buffers);
  }
  co_return !ec;
}

Awaitable<void> watch_disconnect(tcp::socket& socket) {
  for (;;) {
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, kTuple);
    if (ec == asio::error::operation_aborted) co_return;
    if (!ec) {
      char byte = 0;
      beast::error_code peek_ec;
      socket.non_blocking(true, peek_ec);
      const std::size_t n =
          socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
      if (peek_ec == asio::error::would_block || peek_ec == asio::error::try_again) continue;
      if (!peek_ec && n > 0) {
        // Data ahead (a pipelined request): nothing more to watch; wait to be cancelled.
        asio::steady_timer forever(socket.get_executor(),
                                   std::chrono::steady_clock::time_point::max());
        co_await forever.async_wait(kTuple);
        co_return;
      }
    }
    co_return;  // EOF or an error: the client is gone
  }
}

}  // namespace prefixgate::serving
