#include "request_reader.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include "prefixgate/serving/socket_io.h"

namespace prefixgate::serving {

Awaitable<beast::error_code> RequestReader::read_more(std::size_t room) {
  if (!armed_) {
    deadline_.arm(c_.stream.socket(), timeout_);
    armed_ = true;
  }
  auto [ec, got] = co_await c_.stream.socket().async_read_some(c_.buffer.prepare(room),
                                                               asio::as_tuple(asio::use_awaitable));
  c_.buffer.commit(got);
  if (ec && deadline_.expired()) timed_out_ = true;
  // The client ended its stream with part of a request sent: malformed, as Beast's reads say.
  if (ec == asio::error::eof) ec = http::error::partial_message;
  co_return ec;
}

bool RequestReader::expects_continue(const Request& req) {
  return req.version() >= 11 && beast::iequals(req[http::field::expect], "100-continue");
}

Awaitable<beast::error_code> RequestReader::send_continue() {
  c_.stream.expires_after(c_.write_timeout);
  const beast::error_code ec = co_await write_text(c_.stream, "HTTP/1.1 100 Continue\r\n\r\n", {});
  c_.stream.expires_never();
  co_return ec;
}

void RequestReader::finish() {
  if (!armed_) return;
  deadline_.disarm();
  armed_ = false;
}

bool RequestReader::header_buffered(RequestParser& parser, beast::error_code& ec) {
  return parse_buffered(parser, c_.buffer, ParseUntil::kHeader, ec);
}

Awaitable<beast::error_code> RequestReader::header(RequestParser& parser) {
  beast::error_code ec;
  while (!header_buffered(parser, ec) && !ec) {
    // (A plain statement around the co_await: GCC 12 mishandles some inside conditions.)
    ec = co_await read_more(read_room_);
    if (ec) break;
  }
  co_return ec;
}

bool RequestReader::body_buffered(RequestParser& parser, std::size_t max_body_bytes,
                                  beast::error_code& ec) {
  ec = {};
  if (!parser.chunked()) return parse_buffered(parser, c_.buffer, ParseUntil::kMessage, ec);
  if (c_.buffer.size() == 0) return false;
  const ChunkedBody::Result result = decode_buffered(chunked_, c_.buffer, parser.get().body());
  if (result == ChunkedBody::Result::kError) {
    ec = http::error::bad_chunk;
  } else if (parser.get().body().size() > max_body_bytes) {
    // Checked as the data arrives: at most a buffer's worth past the limit is ever held.
    ec = http::error::body_limit;
  }
  return result == ChunkedBody::Result::kDone;
}

std::size_t RequestReader::body_room(const RequestParser& parser) const {
  if (parser.chunked()) return read_room_;
  const auto rest = parser.content_length_remaining();
  return rest ? std::max(ReadSizer::room_for_rest(*rest), read_room_) : read_room_;
}

Awaitable<beast::error_code> RequestReader::body(RequestParser& parser,
                                                 std::size_t max_body_bytes) {
  beast::error_code ec;
  while (!body_buffered(parser, max_body_bytes, ec) && !ec) {
    ec = co_await read_more(body_room(parser));
    if (ec) break;
  }
  co_return ec;
}

}  // namespace prefixgate::serving
