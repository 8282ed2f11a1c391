// send_now and parse_buffered on real loopback sockets: what they take, what they
// leave, and that a message parsed from the buffer in any number of pieces is the message
// Beast's own read gives.
#include "prefixgate/serving/socket_io.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "serving/socket_pair.h"

namespace prefixgate::serving {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

using prefixgate::testing::SocketPair;

std::string buffer_text(const beast::flat_buffer& b) {
  return beast::buffers_to_string(b.data());
}

TEST(SocketIoTest, SendNowTakesWhatFitsAndAFullSendBufferIsZeroWithoutAnError) {
  SocketPair p;
  p.a.set_option(asio::socket_base::send_buffer_size(4096));
  p.b.set_option(asio::socket_base::receive_buffer_size(4096));
  const std::string head = "head:";
  const std::string body(8 << 20, 'x');
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
  beast::error_code ec;
  const std::size_t first = send_now(p.a, buffers, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, head.size() + body.size());  // 8 MiB does not fit a 4 KiB buffer
  std::size_t sent = first;
  std::size_t zero_sends = 0;
  for (int i = 0; i < 1000 && zero_sends == 0; ++i) {
    const std::size_t more =
        send_now(p.a, std::array<asio::const_buffer, 1>{asio::buffer(body.data(), 1024)}, ec);
    ASSERT_FALSE(ec) << ec.message();
    sent += more;
    zero_sends += more == 0 ? 1 : 0;
  }
  EXPECT_EQ(zero_sends, 1u) << "a full send buffer reports 0 bytes and no error";
  std::string got(first, '\0');
  asio::read(p.b, asio::buffer(got));
  EXPECT_EQ(got, (head + body).substr(0, first)) << "the head first, then the body, in order";
}

TEST(SocketIoTest, SendNowToAClosedPeerIsAnErrorNotASignal) {
  SocketPair p;
  p.b.set_option(asio::socket_base::linger(true, 0));  // close with a reset
  p.b.close();
  beast::error_code ec;
  const std::string bytes(1024, 'y');
  const std::array<asio::const_buffer, 1> buffers{asio::buffer(bytes)};
  for (int i = 0; i < 100 && !ec; ++i) send_now(p.a, buffers, ec);
  EXPECT_TRUE(ec == asio::error::connection_reset || ec == asio::error::broken_pipe)
      << ec.message();
  // Once reset, a send is EPIPE, which comes with SIGPIPE unless the send says not to: the
  // signal would end this program (and a server) here.
  send_now(p.a, buffers, ec);
  EXPECT_EQ(ec, asio::error::broken_pipe) << ec.message();
}

// What Beast's parser makes of `bytes` given whole.
template <class Parser>
std::string parsed_whole(std::string_view bytes, Parser& parser) {
  beast::error_code ec;
  parser.eager(true);
  const std::size_t used = parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  return std::string(bytes.substr(0, used));
}

std::string describe(const http::request<http::string_body>& m) {
  std::string out = std::string(m.method_string()) + " " + std::string(m.target()) + "\n";
  for (const auto& f : m)
    out += std::string(f.name_string()) + ": " + std::string(f.value()) + "\n";
  return out + "body=" + m.body();
}

TEST(SocketIoTest, ARequestParsedInTwoPiecesAtAnySplitIsBeastsParseOfIt) {
  const std::vector<std::string> requests = {
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n "
      "world\r\n0\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Multi: a\r\nX-Multi: b\r\n\r\n",
  };
  const std::string next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";  // pipelined after it
  for (const std::string& request : requests) {
    http::request_parser<http::string_body> whole;
    parsed_whole(request, whole);
    const std::string expected = describe(whole.get());
    const std::string bytes = request + next;
    for (std::size_t split = 0; split <= request.size(); ++split) {
      http::request_parser<http::string_body> parser;
      beast::flat_buffer buffer;
      beast::error_code ec;
      auto add = [&](std::string_view s) {
        if (s.empty()) return;  // an empty buffer's data may be null, which memcpy must not get
        const auto room = buffer.prepare(s.size());
        std::memcpy(room.data(), s.data(), s.size());
        buffer.commit(s.size());
      };
      add(std::string_view(bytes).substr(0, split));
      const bool done_early = parse_buffered(parser, buffer, ParseUntil::kMessage, ec);
      ASSERT_FALSE(ec) << ec.message() << " at split " << split;
      EXPECT_EQ(done_early, split == request.size()) << "split " << split;
      add(std::string_view(bytes).substr(split));
      ASSERT_TRUE(parse_buffered(parser, buffer, ParseUntil::kMessage, ec)) << "split " << split;
      ASSERT_FALSE(ec) << ec.message();
      EXPECT_EQ(describe(parser.get()), expected) << "split " << split;
      EXPECT_EQ(buffer_text(buffer), next) << "the next request stays in the buffer";
    }
  }
}

TEST(SocketIoTest, ParseErrorsAreTheOnesBeastsReadGives) {
  const auto error_of = [](std::string_view bytes, std::uint64_t body_limit,
                           std::uint32_t header_limit) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(body_limit);
    parser.header_limit(header_limit);
    beast::flat_buffer buffer;
    const auto room = buffer.prepare(bytes.size());
    std::memcpy(room.data(), bytes.data(), bytes.size());
    buffer.commit(bytes.size());
    beast::error_code ec;
    EXPECT_FALSE(parse_buffered(parser, buffer, ParseUntil::kMessage, ec));
    return ec;
  };
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nx", 10, 8192),
            http::error::body_limit);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nX-Long: " + std::string(500, 'a') + "\r\n\r\n", 10, 100),
            http::error::header_limit);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nBad Header\r\n\r\n", 10, 8192), http::error::bad_field);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", 10, 8192),
            beast::error_code())
      << "a body still on its way is no error";
}

TEST(SocketIoTest, AHeaderOnlyParseLeavesTheBodyAndABufferBodyTakesItPieceByPiece) {
  const std::string body(100, 'b');
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  http::response_parser<http::buffer_body> parser;
  beast::flat_buffer buffer;
  const auto room = buffer.prepare(response.size());
  std::memcpy(room.data(), response.data(), response.size());
  buffer.commit(response.size());
  beast::error_code ec;
  ASSERT_TRUE(parse_buffered(parser, buffer, ParseUntil::kHeader, ec)) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
  EXPECT_EQ(buffer_text(buffer), body) << "the body is left for the reader";
  std::string read;
  char chunk[30];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    parse_buffered(parser, buffer, ParseUntil::kMessage, ec);
    ASSERT_TRUE(!ec || ec == http::error::need_buffer) << ec.message();
    read.append(chunk, sizeof chunk - parser.get().body().size);
  }
  EXPECT_EQ(read, body);
  EXPECT_EQ(buffer.size(), 0u);
}

TEST(SocketIoTest, AChunkedBodyArrivingInPiecesComesOutWholeThroughABufferBody) {
  std::string body;
  std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 200; ++i) {
    const std::string line = "{\"type\":\"stored\",\"seq\":" + std::to_string(i) + "}\n";
    body += line;
    char size[16];
    std::snprintf(size, sizeof size, "%zx", line.size());
    wire += std::string(size) + "\r\n" + line + "\r\n";
  }
  wire += "0\r\n\r\n";
  for (const std::size_t piece : {1ul, 7ul, 100ul, 5000ul}) {
    http::response_parser<http::buffer_body> parser;
    beast::flat_buffer buffer;
    beast::error_code ec;
    std::size_t at = 0;
    const auto add = [&] {
      const std::size_t n = std::min(piece, wire.size() - at);
      const auto room = buffer.prepare(n);
      std::memcpy(room.data(), wire.data() + at, n);
      buffer.commit(n);
      at += n;
    };
    while (!parse_buffered(parser, buffer, ParseUntil::kHeader, ec)) {
      ASSERT_FALSE(ec) << ec.message();
      add();
    }
    std::string read;
    char chunk[64];
    for (int guard = 0; !parser.is_done() && guard < 100000; ++guard) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      parse_buffered(parser, buffer, ParseUntil::kMessage, ec);
      ASSERT_TRUE(!ec || ec == http::error::need_buffer) << ec.message();
      const std::size_t got = sizeof chunk - parser.get().body().size;
      read.append(chunk, got);
      if (got == 0 && at < wire.size()) add();  // what is buffered is not enough: read more
    }
    EXPECT_TRUE(parser.is_done()) << "piece " << piece;
    EXPECT_EQ(read, body) << "piece " << piece;
  }
}

TEST(ReadSizerTest, StartsAtTheMinimumFollowsTheLastRequestAndStopsAtTheMaximum) {
  ReadSizer sizer;
  EXPECT_EQ(sizer.next(), ReadSizer::kMin);
  sizer.saw(100);
  EXPECT_EQ(sizer.next(), ReadSizer::kMin);  // small requests keep the minimum
  sizer.saw(30 * 1024);
  // The body, room for its header, rounded up to the grain.
  EXPECT_GE(sizer.next(), 30 * 1024 + ReadSizer::kHeaderRoom);
  EXPECT_LT(sizer.next(), 30 * 1024 + ReadSizer::kHeaderRoom + ReadSizer::kGrain);
  EXPECT_EQ(sizer.next() % ReadSizer::kGrain, 0u);
  sizer.saw(std::size_t{10} << 20);
  EXPECT_EQ(sizer.next(), ReadSizer::kMax);
  sizer.saw(0);
  EXPECT_EQ(sizer.next(), ReadSizer::kMin);  // and back when the requests are small again
  EXPECT_EQ(ReadSizer::room_for_rest(1000), 1000u);
  EXPECT_EQ(ReadSizer::room_for_rest(std::uint64_t{1} << 40), ReadSizer::kMax);
}

}  // namespace
}  // namespace prefixgate::serving
