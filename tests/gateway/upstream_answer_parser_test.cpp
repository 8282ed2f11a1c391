// The parser of a replica's answer against Beast's own response parser as the oracle: the same
// status, the first Content-Type, keep-alive and the same body bytes, whatever pieces the answer
// arrives in and however small the buffers lent to its body; and what Beast refuses, refused.
#include "server/upstream_answer_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "prefixgate/serving/chunked_body.h"

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
  out.keep_alive = p.keep_alive();  // the parser's: an answer up to the close keeps nothing
  // A chunked answer without a body (204, 304, 1xx) has no chunks to read.
  const unsigned status = p.get().result_int();
  out.chunked = p.chunked() && status / 100 != 1 && status != 204 && status != 304;
  out.body = p.get().body();
  return out;
}

// UpstreamAnswerParser, the answer arriving in pieces of up to `max_piece` bytes and its body
// taken into buffers of `room` bytes, as the gateway's exchange reads it: the header when it is
// whole, then a chunked body through serving::ChunkedBody, any other through body().
Parsed under_test(const std::string& answer, std::mt19937& rng, std::size_t max_piece,
                  std::size_t room) {
  UpstreamAnswerParser p;
  std::string buffer;
  std::vector<char> chunk(room);
  serving::ChunkedBody chunked;
  Parsed out;
  std::size_t sent = 0;
  boost::beast::error_code ec;
  bool ended = false;  // the body's end is read
  for (;;) {
    if (!p.is_header_done()) {
      std::size_t used = 0;
      if (p.header(buffer, used, ec)) buffer.erase(0, used);
      if (ec) break;
    }
    if (p.is_header_done()) {
      if (p.chunked()) {
        std::size_t used = 0;
        const auto r = chunked.decode(buffer, out.body, used);
        buffer.erase(0, used);
        if (r == serving::ChunkedBody::Result::kError) break;
        ended = r == serving::ChunkedBody::Result::kDone;
      } else {
        // A fresh buffer lent whenever the last one is full, as the exchange lends one a read.
        for (;;) {
          p.lend_body(chunk.data(), chunk.size());
          const std::size_t used = p.body(buffer, ec);
          buffer.erase(0, used);
          out.body.append(chunk.data(), room - p.body_room());
          if (ec || used == 0) break;
        }
        if (ec) break;
        ended = p.is_done();
      }
    }
    if (ended) break;
    if (sent == answer.size()) {
      if (!p.is_header_done() || p.chunked()) break;  // cut short
      p.put_eof(ec);
      ended = !ec;
      break;
    }
    const std::size_t piece = std::min(
        answer.size() - sent, std::uniform_int_distribution<std::size_t>(1, max_piece)(rng));
    buffer.append(answer, sent, piece);
    sent += piece;
  }
  out.ok = !ec && ended;
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
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  boost::beast::error_code ec;
  std::size_t used = 0;
  ASSERT_TRUE(p.header(answer, used, ec));
  EXPECT_EQ(answer.substr(used), "abc");
  EXPECT_EQ(p.body(std::string_view(answer).substr(used), ec), 0u);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(p.is_done());
  char room[8];
  p.lend_body(room, sizeof room);
  EXPECT_EQ(p.body(std::string_view(answer).substr(used), ec), 3u);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(std::string(room, sizeof room - p.body_room()), "abc");
  EXPECT_EQ(p.content_type(), "");
  // Bytes after the body are not its.
  p.lend_body(room, sizeof room);
  EXPECT_EQ(p.body("more", ec), 0u);
}

TEST(UpstreamAnswerParserTest, AHeaderInPiecesWaitsForItsEnd) {
  const std::string answer = "HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n";
  for (std::size_t cut = 0; cut < answer.size(); ++cut) {
    UpstreamAnswerParser p;
    boost::beast::error_code ec;
    std::size_t used = 7;
    EXPECT_FALSE(p.header(std::string_view(answer).substr(0, cut), used, ec));
    EXPECT_FALSE(ec) << cut;
    EXPECT_EQ(used, 0u);
  }
  UpstreamAnswerParser p;
  boost::beast::error_code ec;
  std::size_t used = 0;
  ASSERT_TRUE(p.header(answer, used, ec));
  EXPECT_EQ(used, answer.size());
  EXPECT_TRUE(p.is_done());  // 204: no body
  EXPECT_TRUE(p.keep_alive());
}

// "close" closes the connection whatever else Connection names (RFC 9112, 9.3), over HTTP/1.0
// too, where Beast's parser keeps a connection that also names keep-alive.
TEST(UpstreamAnswerParserTest, ACloseTokenClosesBesideKeepAlive) {
  for (const std::string version : {"1.0", "1.1"}) {
    for (const std::string connection : {"keep-alive, close", "close, keep-alive"}) {
      UpstreamAnswerParser p;
      const std::string answer =
          "HTTP/" + version + " 204 No Content\r\nConnection: " + connection + "\r\n\r\n";
      boost::beast::error_code ec;
      std::size_t used = 0;
      ASSERT_TRUE(p.header(answer, used, ec)) << answer;
      EXPECT_FALSE(p.keep_alive()) << answer;
    }
  }
  UpstreamAnswerParser p;
  const std::string answer = "HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n";
  boost::beast::error_code ec;
  std::size_t used = 0;
  ASSERT_TRUE(p.header(answer, used, ec));
  EXPECT_TRUE(p.keep_alive());
}

TEST(UpstreamAnswerParserTest, ABodyCutShortAtTheCloseIsAnError) {
  UpstreamAnswerParser p;
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
  boost::beast::error_code ec;
  std::size_t used = 0;
  ASSERT_TRUE(p.header(answer, used, ec));
  char room[16];
  p.lend_body(room, sizeof room);
  EXPECT_EQ(p.body(std::string_view(answer).substr(used), ec), 3u);
  p.put_eof(ec);
  EXPECT_EQ(ec, http::error::partial_message);
}

// Answers that could be framed two ways, or are not HTTP/1.x, are refused, and so are they by
// Beast's parser; a header over the limit is refused before its end arrives.
TEST(UpstreamAnswerParserTest, RefusesWhatBeastRefuses) {
  const std::vector<std::string> bad = {
      "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",                          // bare LF
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",  // two lengths
      "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx",                      // not digits
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",  // a space in a name
      "HTTP/1.1 200 OK\r\nName : x\r\nContent-Length: 0\r\n\r\n",     // a space before ':'
      "HTTP/1.1 200 OK\r\n: x\r\nContent-Length: 0\r\n\r\n",          // no name
      "HTTP/1.1 200 OK\r\nNo-Colon\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\x01"
      "b\r\nContent-Length: 0\r\n\r\n",  // a control character in a value
      "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",  // no space after the status
      "ICY 200 OK\r\n\r\n",
  };
  for (const std::string& answer : bad) {
    SCOPED_TRACE(answer);
    UpstreamAnswerParser p;
    boost::beast::error_code ec;
    std::size_t used = 0;
    EXPECT_FALSE(p.header(answer, used, ec));
    EXPECT_TRUE(ec);
    EXPECT_FALSE(oracle(answer).ok);
  }
  UpstreamAnswerParser p;
  boost::beast::error_code ec;
  std::size_t used = 0;
  const std::string endless = "HTTP/1.1 200 OK\r\nX: " + std::string(9000, 'y');
  EXPECT_FALSE(p.header(endless, used, ec));
  EXPECT_EQ(ec, http::error::header_limit);
}

// Random answers of every framing, with fields in any case and order, extra spaces and
// repeated fields, against Beast's parser: what this parser takes, Beast's takes the same way;
// what Beast's refuses, this one refuses.
TEST(UpstreamAnswerParserTest, RandomAnswersAreReadAsBeastReadsThem) {
  std::mt19937 rng(11);
  const auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  const auto any_case = [&](std::string s) {
    for (char& c : s) {
      if (pick(2) == 0) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return s;
  };
  const std::vector<std::string> statuses = {"200 OK",
                                             "200",
                                             "200 ",
                                             "404 Not Found",
                                             "503 Service Unavailable",
                                             "204 No Content",
                                             "304 Not Modified",
                                             "500 x y z",
                                             "299 \xe9t\xe9"};
  const std::vector<std::string> spaces = {"", " ", "  ", "\t", " \t "};
  int agreed_ok = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string head = std::string("HTTP/1.") + (pick(3) == 0 ? "0 " : "1 ") +
                       statuses[pick(statuses.size())] + "\r\n";
    std::string body = std::string(pick(40), 'b');
    std::vector<std::string> fields;
    const auto add = [&](const std::string& name, const std::string& value) {
      fields.push_back(any_case(name) + ":" + spaces[pick(spaces.size())] + value +
                       spaces[pick(spaces.size())]);
    };
    const std::size_t framing = pick(5);
    std::string sent_body = body;
    if (framing == 0 || framing == 1) {
      add("content-length", std::to_string(body.size()));
      if (framing == 1) add("content-length", std::to_string(body.size()));  // the same twice
    } else if (framing == 2) {
      add("transfer-encoding", pick(2) == 0 ? "chunked" : "gzip, chunked");
      char size[16];
      std::snprintf(size, sizeof size, "%zx", body.size());
      sent_body = body.empty() ? "0\r\n\r\n" : std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
    } else if (framing == 3) {
      add("transfer-encoding", "gzip");  // not chunked last: up to the close
    }                                    // 4: neither, up to the close
    if (pick(2) == 0) add("content-type", pick(2) == 0 ? "application/json" : "text/event-stream");
    if (pick(4) == 0) add("content-type", "text/plain");
    const std::size_t connection = pick(4);
    if (connection == 1) add("connection", "close");
    if (connection == 2) add("connection", "keep-alive");
    if (connection == 3) add("connection", "Keep-Alive, Upgrade");
    if (pick(2) == 0) add("server", "uvicorn");
    if (pick(3) == 0) add("x-request-id", "abc-" + std::to_string(round));
    std::shuffle(fields.begin(), fields.end(), rng);
    // Now and then something malformed.
    const std::size_t damage = pick(12);
    for (const std::string& f : fields) head += f + "\r\n";
    if (damage == 0) head += "X-Fold: a\r\n continued\r\n";
    if (damage == 1) head += "X Space: a\r\n";
    if (damage == 2) head += "X-Ctl: a\x7f\r\n";
    if (damage == 3 && framing == 0) head += "Transfer-Encoding: chunked\r\n";
    if (damage == 4 && framing == 0) head += "Content-Length: 999\r\n";
    const std::string answer = head + "\r\n" + sent_body;
    SCOPED_TRACE(answer);
    const Parsed expected = oracle(answer);
    const Parsed got = under_test(answer, rng, 1 + pick(64), 1 + pick(32));
    if (!expected.ok) {
      EXPECT_FALSE(got.ok);
      continue;
    }
    if (damage == 0) {
      EXPECT_FALSE(got.ok);  // a folded line: Beast joins it, this parser refuses it
      continue;
    }
    ASSERT_TRUE(got.ok);
    ++agreed_ok;
    EXPECT_EQ(got.status, expected.status);
    EXPECT_EQ(got.content_type, expected.content_type);
    EXPECT_EQ(got.keep_alive, expected.keep_alive);
    EXPECT_EQ(got.chunked, expected.chunked);
    EXPECT_EQ(got.body, expected.body);
  }
  EXPECT_GT(agreed_ok, 1500);  // most answers are well formed
}

}  // namespace
}  // namespace prefixgate::gateway::server
