// The parser of a replica's answer against Beast's own response parser as the oracle: the same
// status, the first Content-Type, keep-alive and the same body bytes, whatever pieces the answer
// arrives in and however small the buffers lent to its body.
#include "server/upstream_answer_parser.h"

#include <gtest/gtest.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace prefixgate::gateway::server {
namespace {

namespace http = boost::beast::http;

struct Parsed {
  bool ok = false;
  unsigned status = 0;
  std::string content_type;
  bool keep_alive = false;
  bool chunked = false;
  std::string body;
};

// Beast's response parser, the whole answer at once.
Parsed oracle(const std::string& answer) {
  http::response_parser<http::string_body> p;
  p.eager(true);
  boost::beast::error_code ec;
  std::size_t at = 0;
  while (at < answer.size() && !ec && !p.is_done()) {
    at += p.put(boost::asio::buffer(answer.data() + at, answer.size() - at), ec);
  }
  if (!p.is_done() && !ec) p.put_eof(ec);
  Parsed out;
  out.ok = !ec && p.is_done();
  if (!out.ok) return out;
  out.status = p.get().result_int();
  const auto found = p.get().find(http::field::content_type);
  if (found != p.get().end()) out.content_type = std::string(found->value());
  out.keep_alive = p.get().keep_alive();
  out.chunked = p.chunked();
  out.body = p.get().body();
  return out;
}

// UpstreamAnswerParser, the answer arriving in pieces of up to `max_piece` bytes and its body
// taken into buffers of `room` bytes, as the gateway's exchange reads it.
Parsed under_test(const std::string& answer, std::mt19937& rng, std::size_t max_piece,
                  std::size_t room) {
  UpstreamAnswerParser p;
  p.eager(true);
  boost::beast::flat_buffer buffer;
  std::vector<char> chunk(room);
  Parsed out;
  std::size_t sent = 0;
  boost::beast::error_code ec;
  bool header_seen = false;
  for (;;) {
    // Parse what the buffer holds, lending a fresh chunk whenever the last one is full.
    for (;;) {
      if (header_seen) p.lend_body(chunk.data(), chunk.size());
      ec = {};
      const std::size_t used = p.put(buffer.data(), ec);
      buffer.consume(used);
      if (p.is_header_done()) {
        if (header_seen) out.body.append(chunk.data(), room - p.body_room());
        header_seen = true;
      }
      if (ec == http::error::need_buffer) continue;
      if (ec == http::error::need_more) ec = {};
      if (ec || p.is_done() || used == 0) break;
    }
    if (ec || p.is_done()) break;
    if (sent == answer.size()) {
      p.put_eof(ec);
      break;
    }
    const std::size_t piece = std::min(
        answer.size() - sent, std::uniform_int_distribution<std::size_t>(1, max_piece)(rng));
    auto space = buffer.prepare(piece);
    std::memcpy(space.data(), answer.data() + sent, piece);
    buffer.commit(piece);
    sent += piece;
  }
  out.ok = !ec && p.is_done();
  if (!out.ok) return out;
  out.status = p.result_int();
  out.content_type = std::string(p.content_type());
  out.keep_alive = p.keep_alive();
  out.chunked = p.chunked();
  return out;
}

const std::string kLongType = "application/json; profile=\"" + std::string(80, 'p') + "\"";

const std::vector<std::string> kAnswers = {
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n"
    "Server: prefixgate-engine\r\n\r\n{\"usage\":{}}\n",
    // The first of two Content-Types, as a lookup of Beast's fields gives it.
    "HTTP/1.1 200 OK\r\nDate: Mon, 07 Dec 2026 11:00:00 GMT\r\ncontent-type: text/plain\r\n"
    "Content-Type: application/json\r\ncontent-length: 2\r\n\r\nok",
    // Longer than the parser keeps in place.
    "HTTP/1.1 200 OK\r\nContent-Type: " + kLongType + "\r\nContent-Length: 4\r\n\r\nlong",
    // No Content-Type at all, and a body that ends where the replica closes.
    "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\nthe rest until the end",
    // A streamed answer: chunks, an extension, a trailer.
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "e\r\ndata: {\"a\":1}\n\r\n4;ext=1\r\n\n\n\n\n\r\n0\r\nX-Trailer: t\r\n\r\n",
    // HTTP/1.0 keeps the connection only when asked.
    "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
    "Connection: keep-alive\r\n\r\n{}",
    "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    // A body larger than the buffers the test lends.
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n" +
        std::string(5000, 'x'),
};

TEST(UpstreamAnswerParserTest, AgreesWithBeastsResponseParserInAnyPiecesAndBuffers) {
  std::mt19937 rng(7);
  for (const std::string& answer : kAnswers) {
    SCOPED_TRACE(answer.substr(0, 60));
    const Parsed expected = oracle(answer);
    ASSERT_TRUE(expected.ok);
    for (const std::size_t max_piece : {std::size_t{1}, std::size_t{7}, answer.size()}) {
      for (const std::size_t room : {std::size_t{1}, std::size_t{5}, std::size_t{16384}}) {
        const Parsed got = under_test(answer, rng, max_piece, room);
        ASSERT_TRUE(got.ok) << "pieces of " << max_piece << ", room " << room;
        EXPECT_EQ(got.status, expected.status);
        EXPECT_EQ(got.content_type, expected.content_type);
        EXPECT_EQ(got.keep_alive, expected.keep_alive);
        EXPECT_EQ(got.chunked, expected.chunked);
        EXPECT_EQ(got.body, expected.body);
      }
    }
  }
}

TEST(UpstreamAnswerParserTest, WithoutALentBufferTheBodyWaits) {
  UpstreamAnswerParser p;
  p.eager(true);
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  boost::beast::error_code ec;
  std::size_t used = p.put(boost::asio::buffer(answer), ec);
  EXPECT_TRUE(p.is_header_done());
  if (!ec) used += p.put(boost::asio::buffer(answer.data() + used, answer.size() - used), ec);
  EXPECT_EQ(ec, http::error::need_buffer);
  EXPECT_FALSE(p.is_done());
  char room[8];
  p.lend_body(room, sizeof room);
  ec = {};
  used += p.put(boost::asio::buffer(answer.data() + used, answer.size() - used), ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(std::string(room, sizeof room - p.body_room()), "abc");
  EXPECT_EQ(p.content_type(), "");
}

}  // namespace
}  // namespace prefixgate::gateway::server
