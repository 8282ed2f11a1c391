#include "prefixgate/serving/socket_io.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <boost/beast/http/error.hpp>
#include <cerrno>
#include <string_view>

namespace prefixgate::serving {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK;
}

template <bool isRequest>
bool parse(http::basic_parser<isRequest>& parser, beast::flat_buffer& buffer, ParseUntil until,
           beast::error_code& ec) {
  ec = {};
  const bool header_only = until == ParseUntil::kHeader;
  const auto done = [&] { return header_only ? parser.is_header_done() : parser.is_done(); };
  // As http::async_read_header sets it; see the header on kMessage.
  if (header_only) parser.eager(false);
  while (!done()) {
    if (buffer.size() == 0) return false;
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return false;
    }
    if (ec) return false;
    if (used == 0) return false;  // no progress and no error: the rest is left to a read
  }
  return true;
}

}  // namespace

std::size_t send_now(asio::ip::tcp::socket& socket, std::span<const asio::const_buffer> buffers,
                     beast::error_code& ec) {
  ec = {};
  constexpr std::size_t kMaxBuffers = 8;
  std::array<iovec, kMaxBuffers> iov{};
  std::size_t count = 0;
  for (const asio::const_buffer& b : buffers) {
    if (b.size() == 0) continue;
    if (count == kMaxBuffers) break;  // the rest goes with the caller's asynchronous write
    iov[count].iov_base = const_cast<void*>(b.data());
    iov[count].iov_len = b.size();
    ++count;
  }
  if (count == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = count;
  for (;;) {
    const ssize_t n = ::sendmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (!would_block(errno)) ec.assign(errno, asio::error::get_system_category());
    return 0;
  }
}

bool parse_buffered(http::basic_parser<true>& parser, beast::flat_buffer& buffer, ParseUntil until,
                    beast::error_code& ec) {
  return parse(parser, buffer, until, ec);
}

bool parse_buffered(http::basic_parser<false>& parser, beast::flat_buffer& buffer, ParseUntil until,
                    beast::error_code& ec) {
  return parse(parser, buffer, until, ec);
}

ChunkedBody::Result decode_buffered(ChunkedBody& body, beast::flat_buffer& buffer,
                                    std::string& out) {
  const auto data = buffer.data();
  std::size_t used = 0;
  const ChunkedBody::Result result =
      body.decode(std::string_view(static_cast<const char*>(data.data()), data.size()), out, used);
  buffer.consume(used);
  return result;
}

}  // namespace prefixgate::serving
