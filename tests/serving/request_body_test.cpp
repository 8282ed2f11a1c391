// RequestBody reads a request's body exactly as string_body does, whatever the framing and
// however the bytes are split between reads.
#include "prefixgate/serving/request_body.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <random>
#include <string>
#include <vector>

namespace prefixgate::serving {
namespace {

namespace http = boost::beast::http;

// Feeds `wire` to a parser of Body in pieces of the given sizes (the last piece takes the rest)
// and returns the body, or "error: ..." when the parser refuses it.
template <class Body>
std::string read_body(const std::string& wire, const std::vector<std::size_t>& pieces,
                      std::uint64_t body_limit = 1 << 20) {
  http::request_parser<Body> parser;
  parser.eager(true);
  parser.body_limit(body_limit);
  std::size_t at = 0;
  std::size_t piece = 0;
  std::string pending;  // bytes fed but not yet consumed by the parser
  while (!parser.is_done()) {
    if (at == wire.size() && pending.empty()) return "error: incomplete";
    const std::size_t n =
        piece < pieces.size() ? std::min(pieces[piece++], wire.size() - at) : wire.size() - at;
    pending += wire.substr(at, n);
    at += n;
    boost::beast::error_code ec;
    // Even when it needs more, the parser may have taken some bytes (a chunk's first part).
    const std::size_t used = parser.put(boost::asio::buffer(pending), ec);
    pending.erase(0, used);
    if (ec == http::error::need_more && n == 0 && used == 0) return "error: incomplete";
    if (ec == http::error::need_more) continue;
    if (ec) return "error: " + ec.message();
  }
  return parser.get().body();
}

std::string random_text(std::mt19937& rng, std::size_t n) {
  std::string s(n, ' ');
  for (char& c : s) c = static_cast<char>(rng() % 256);
  return s;
}

std::string chunked(const std::string& body, std::size_t chunk) {
  std::string wire =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const std::size_t n = std::min(chunk, body.size() - at);
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    wire += size + body.substr(at, n) + "\r\n";
  }
  return wire + "0\r\n\r\n";
}

std::string with_length(const std::string& body) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(RequestBody, ReadsWhatStringBodyReadsHoweverTheBytesArrive) {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    const std::string body = random_text(rng, rng() % 5000);
    std::vector<std::size_t> pieces;
    for (int i = 0; i < 8; ++i) pieces.push_back(1 + rng() % 700);
    for (const std::string& wire : {with_length(body), chunked(body, 1 + rng() % 900)}) {
      const std::string got = read_body<RequestBody>(wire, pieces);
      ASSERT_EQ(read_body<http::string_body>(wire, pieces), body) << "round " << round;
      ASSERT_EQ(got, body) << "round " << round;
    }
  }
}

TEST(RequestBody, KeepsTheParsersBodyLimit) {
  const std::string body(3000, 'x');
  EXPECT_EQ(read_body<RequestBody>(with_length(body), {}, 2999).rfind("error: ", 0), 0u);
  EXPECT_EQ(read_body<RequestBody>(chunked(body, 700), {}, 2999).rfind("error: ", 0), 0u);
  EXPECT_EQ(read_body<RequestBody>(with_length(body), {}, 3000), body);
}

// A body of announced length leaves the JSON parser's padding in its buffer past its end, so
// the gateway parses it where it lies (an empty body, which Beast never hands the reader, has
// nothing to parse).
TEST(RequestBody, LeavesTheParsersPaddingPastABodyOfAnnouncedLength) {
  for (std::size_t n : {1u, 15u, 16u, 100u, 3141u, 30000u}) {
    const std::string wire = with_length(std::string(n, 'x'));
    http::request_parser<RequestBody> parser;
    parser.eager(true);
    boost::beast::error_code ec;
    parser.put(boost::asio::buffer(wire), ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_done());
    const std::string& body = parser.get().body();
    EXPECT_EQ(body.size(), n);
    EXPECT_GE(readable_past_end(body), kReadablePastEnd) << n << " bytes";
  }
}

TEST(RequestBody, AnEmptyBodyIsEmpty) {
  EXPECT_EQ(read_body<RequestBody>(with_length(""), {}), "");
  EXPECT_EQ(read_body<RequestBody>(chunked("", 1), {}), "");
}

}  // namespace
}  // namespace prefixgate::serving
