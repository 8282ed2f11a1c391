#include "request_reader.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>
#include <string_view>

#include "prefixgate/serving/chunked_body.h"
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

void RequestReader::finish() {
  if (!armed_) return;
  deadline_.disarm();
  armed_ = false;
}

Awaitable<beast::error_code> RequestReader::header(RequestParser& parser) {
  beast::error_code ec;
  while (!parse_buffered(parser, c_.buffer, ParseUntil::kHeader, ec)) {
    if (ec) co_return ec;
    if (ec = co_await read_more(read_room_); ec) co_return ec;
  }
  co_return ec;
}

Awaitable<beast::error_code> RequestReader::body(RequestParser& parser,
                                                 std::size_t max_body_bytes) {
  if (parser.chunked()) co_return co_await chunked_body(parser, max_body_bytes);
  beast::error_code ec;
  while (!parse_buffered(parser, c_.buffer, ParseUntil::kMessage, ec)) {
    if (ec) co_return ec;
    // The rest of a large body in one read where it fits.
    const auto rest = parser.content_length_remaining();
    const std::size_t room =
        rest ? std::max(ReadSizer::room_for_rest(*rest), read_room_) : read_room_;
    if (ec = co_await read_more(room); ec) co_return ec;
  }
  co_return ec;
}

Awaitable<beast::error_code> RequestReader::chunked_body(RequestParser& parser,
                                                         std::size_t max_body_bytes) {
  ChunkedBody decoder;
  std::string& body = parser.get().body();
  for (;;) {
    if (c_.buffer.size() > 0) {
      const auto data = c_.buffer.data();
      std::size_t used = 0;
      const ChunkedBody::Result result = decoder.decode(
          std::string_view(static_cast<const char*>(data.data()), data.size()), body, used);
      c_.buffer.consume(used);
      if (result == ChunkedBody::Result::kError) co_return http::error::bad_chunk;
      // Checked as the data arrives: at most a buffer's worth past the limit is ever held.
      if (body.size() > max_body_bytes) co_return http::error::body_limit;
      if (result == ChunkedBody::Result::kDone) co_return beast::error_code{};
    }
    if (auto ec = co_await read_more(read_room_); ec) co_return ec;
  }
}

}  // namespace prefixgate::serving
