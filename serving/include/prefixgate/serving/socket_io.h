// Writes and parses that finish at once when the socket or the buffer is ready, without an
// asynchronous operation. Asio runs a completion that needed no waiting (a write the socket took
// whole, a parse of bytes already read) as a posted handler, and its event loop polls epoll once
// more before running it: a proxied request paid about two such polls on top of the waits it
// needed, each a system call, and a handler allocation each. These do the work in the caller
// and report what is left, so the caller starts an asynchronous operation only when there is
// something to wait for:
//
//   std::size_t sent = send_now(socket, buffers, ec);             // what the socket took
//   if (!ec && sent < total) co_await async_write(rest of buffers);
//
//   if (!parse_buffered(parser, buffer, ParseUntil::kMessage, ec) && !ec)
//     co_await http::async_read(stream, buffer, parser);          // the rest of the message
#pragma once

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "prefixgate/serving/chunked_body.h"

namespace prefixgate::serving {

// Sends as much of `buffers` as the socket's send buffer takes now: one non-blocking sendmsg,
// without SIGPIPE. Returns the bytes sent; 0 with no error when the send buffer is full.
std::size_t send_now(boost::asio::ip::tcp::socket& socket,
                     std::span<const boost::asio::const_buffer> buffers,
                     boost::beast::error_code& ec);

enum class ParseUntil {
  kHeader,   // as http::async_read_header: stops after the header (the parser set not eager)
  kMessage,  // as http::async_read: header and body
};

// Beast's read loop without its reads: feeds the bytes in `buffer` to `parser`, consuming those
// it takes, until it has read what `until` says (true), runs out of bytes (false, no error), or
// fails (false, `ec`: the error http::async_read would have given). A buffer_body whose buffer
// is full also stops it (false, http::error::need_buffer). kMessage leaves the parser's eager
// setting as it is: a body streamed into a buffer_body must not be parsed eagerly, or Beast's
// next read, having filled the buffer to a chunk's end, waits for the following chunk before it
// returns (the tail of a burst of engine events sat unread until the stream's next lines).
bool parse_buffered(boost::beast::http::basic_parser<true>& parser,
                    boost::beast::flat_buffer& buffer, ParseUntil until,
                    boost::beast::error_code& ec);
bool parse_buffered(boost::beast::http::basic_parser<false>& parser,
                    boost::beast::flat_buffer& buffer, ParseUntil until,
                    boost::beast::error_code& ec);

// parse_buffered's counterpart for a chunked body decoded by ChunkedBody: decodes what `buffer`
// holds, appending the data to `out`, and consumes the bytes it took (an incomplete line stays
// for the next read).
ChunkedBody::Result decode_buffered(ChunkedBody& body, boost::beast::flat_buffer& buffer,
                                    std::string& out);

// How much a connection's read between requests asks for. A read takes at most the buffer's
// free room, so a request larger than that costs a read (a system call) per room-full: an
// agent whose conversation grows by a turn sends 30 KB and more on every request. The room
// starts at kMin and follows the connection's last request, up to kMax (the most Beast's own
// reads ask for), so only a connection that sent a large request holds a large buffer.
//
//   buffer.prepare(sizer.next());  ...  sizer.saw(request_bytes);
class ReadSizer {
 public:
  static constexpr std::size_t kMin = std::size_t{16} << 10;
  static constexpr std::size_t kMax = std::size_t{64} << 10;
  // Room for a request's header beside its body, and the rounding.
  static constexpr std::size_t kHeaderRoom = std::size_t{2} << 10;
  static constexpr std::size_t kGrain = std::size_t{4} << 10;

  std::size_t next() const { return next_; }
  // The connection's last request had a body of `body_bytes`.
  void saw(std::size_t body_bytes) {
    const std::size_t want = std::min(body_bytes, kMax) + kHeaderRoom;
    next_ = std::clamp((want + kGrain - 1) / kGrain * kGrain, kMin, kMax);
  }
  // Room to reserve before reading the rest of a body with `remaining` bytes still to come:
  // all of it in one read where it fits in kMax.
  static std::size_t room_for_rest(std::uint64_t remaining) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(remaining, kMax));
  }

 private:
  std::size_t next_ = kMin;
};

}  // namespace prefixgate::serving
