// ChunkedBody against Beast's parser: random chunked bodies (sizes in either case of hex,
// extensions, trailers) fed in random pieces decode to the data Beast's parser gives, end where
// it ends, and leave what follows the message untaken; malformed bodies are errors for both.
#include "prefixgate/serving/chunked_body.h"

#include <gtest/gtest.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace prefixgate::serving {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

// What Beast's parser makes of a chunked answer with `body`: the data, or nullopt when it
// refuses it (or it is incomplete).
std::optional<std::string> beast_decode(const std::string& body) {
  const std::string message = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body;
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  beast::error_code ec;
  std::size_t at = 0;
  while (!parser.is_done()) {
    const std::size_t used =
        parser.put(boost::asio::buffer(message.data() + at, message.size() - at), ec);
    at += used;
    if (ec || used == 0) return std::nullopt;
  }
  return parser.get().body();
}

struct Decoded {
  ChunkedBody::Result result = ChunkedBody::Result::kMore;
  std::string data;
  std::size_t used = 0;  // bytes of the input taken in all
};

// `body` given to a ChunkedBody in pieces cut at `cuts` (ascending), each call getting what the
// last left plus the next piece, as a reader's buffer holds it.
Decoded decode_in_pieces(const std::string& body, const std::vector<std::size_t>& cuts) {
  ChunkedBody decoder;
  Decoded d;
  std::size_t given = 0;  // bytes of `body` that have arrived
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    given = i < cuts.size() ? cuts[i] : body.size();
    std::size_t used = 0;
    d.result = decoder.decode(std::string_view(body).substr(d.used, given - d.used), d.data, used);
    d.used += used;
    if (d.result != ChunkedBody::Result::kMore) break;
  }
  return d;
}

class BodyMaker {
 public:
  explicit BodyMaker(unsigned seed) : rng_(seed) {}
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  // A valid chunked body of a few chunks, and the data it carries.
  std::string body(std::string& data) {
    std::string out;
    for (std::size_t n = pick(5); n > 0; --n) {
      std::string chunk;
      for (std::size_t len = 1 + pick(pick(4) == 0 ? 300 : 20); len > 0; --len) {
        chunk += static_cast<char>(pick(256));  // any byte, CR and LF among them
      }
      char size[32];
      std::snprintf(size, sizeof size, pick(2) == 0 ? "%zx" : "%zX", chunk.size());
      out += (pick(6) == 0 ? "00" : "") + std::string(size);
      if (pick(5) == 0) out += pick(2) == 0 ? ";name=value" : " ;ext";
      out += "\r\n" + chunk + "\r\n";
      data += chunk;
    }
    out += pick(4) == 0 ? "0;last\r\n" : "0\r\n";
    if (pick(4) == 0) out += "x-trailer: yes\r\n";
    return out + "\r\n";
  }

  // Random ascending cut points in [0, size].
  std::vector<std::size_t> cuts(std::size_t size) {
    std::vector<std::size_t> out;
    for (std::size_t n = pick(6); n > 0; --n) out.push_back(pick(size + 1));
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::mt19937 rng_;
};

TEST(ChunkedBodyTest, RandomBodiesInRandomPiecesDecodeAsBeastDecodesThem) {
  BodyMaker maker(7);
  for (int round = 0; round < 3000; ++round) {
    std::string data;
    const std::string body = maker.body(data);
    const std::optional<std::string> beast = beast_decode(body);
    ASSERT_TRUE(beast.has_value()) << round;
    ASSERT_EQ(*beast, data);
    // What follows the message (the next answer on a kept-alive connection) is not taken.
    const std::string next = maker.pick(2) == 0 ? "" : "HTTP/1.1 200 OK\r\n";
    const Decoded d = decode_in_pieces(body + next, maker.cuts(body.size() + next.size()));
    ASSERT_EQ(d.result, ChunkedBody::Result::kDone) << round;
    EXPECT_EQ(d.data, data) << round;
    EXPECT_EQ(d.used, body.size()) << round;
  }
}

TEST(ChunkedBodyTest, MalformedBodiesAreErrorsAsForBeast) {
  const std::vector<std::string> bad = {
      "5\nhello\r\n0\r\n\r\n",           // a bare LF after the size
      "5\r\nhello\n0\r\n\r\n",           // a bare LF after the data
      "5\r\nhelloX\r\n0\r\n\r\n",        // data longer than its size
      "g\r\nhello\r\n0\r\n\r\n",         // no hex digit
      "\r\nhello\r\n0\r\n\r\n",          // no size at all
      "5x\r\nhello\r\n0\r\n\r\n",        // junk after the size
      "10000000000000000\r\nx\r\n",      // past 64 bits
      "5\r\nhello\r\n0\r\nx-t: 1\n\r\n"  // a trailer with a bare LF
  };
  for (const std::string& body : bad) {
    EXPECT_FALSE(beast_decode(body).has_value()) << body;
    const Decoded d = decode_in_pieces(body, {});
    EXPECT_EQ(d.result, ChunkedBody::Result::kError) << body;
  }
  // A line that never ends is an error once it is longer than any size line can be.
  ChunkedBody decoder;
  std::string out;
  std::size_t used = 0;
  const std::string endless(ChunkedBody::kMaxLineBytes + 2, '1');
  EXPECT_EQ(decoder.decode(endless, out, used), ChunkedBody::Result::kError);
  // And one cut short stays incomplete: more is needed, nothing is an error yet.
  ChunkedBody partial;
  EXPECT_EQ(partial.decode("5\r\nhel", out, used), ChunkedBody::Result::kMore);
  EXPECT_EQ(used, 6u);
  EXPECT_FALSE(partial.done());
}

TEST(ChunkedBodyTest, AnExtensionsQuotedStringMayHoldABareLineFeedAsForBeast) {
  // Found by fuzz_chunked_body: Beast's parser takes the extension's quoted string up to the
  // line's CRLF, a bare LF inside it included.
  const std::string body = "5;name=\"\nv\"\r\nhello\r\n0\r\n\r\n";
  ASSERT_EQ(beast_decode(body), std::optional<std::string>("hello"));
  const Decoded d = decode_in_pieces(body, {3, 9});
  EXPECT_EQ(d.result, ChunkedBody::Result::kDone);
  EXPECT_EQ(d.data, "hello");
  EXPECT_EQ(d.used, body.size());
}

}  // namespace
}  // namespace prefixgate::serving

namespace prefixgate::serving {
namespace {

// Extensions and trailers are passed over, but only when they fit their grammar: each one here
// Beast's parser refuses too, and each one in `good` it takes, with the same data.
TEST(ChunkedBodyTest, ExtensionsAndTrailersThatFitNoGrammarAreErrorsAsForBeast) {
  const std::vector<std::string> bad = {
      "5;\x01\r\nhello\r\n0\r\n\r\n",             // a control byte for a name
      "5;\r\nhello\r\n0\r\n\r\n",                 // no name
      "5;a b\r\nhello\r\n0\r\n\r\n",              // two names without a ';'
      "5;a \r\nhello\r\n0\r\n\r\n",               // white space after a name without a value
      "5;a=\r\nhello\r\n0\r\n\r\n",               // no value
      "5;a=\"x\r\nhello\r\n0\r\n\r\n",            // a quoted string never closed
      "5;a=b c\r\nhello\r\n0\r\n\r\n",            // junk after a value
      "5;a=@\r\nhello\r\n0\r\n\r\n",              // a value neither a token nor quoted
      "5\r\nhello\r\n0\r\nno colon\r\n\r\n",      // a trailer that is no field
      "5\r\nhello\r\n0\r\n: empty name\r\n\r\n",  // a trailer without a name
  };
  for (const std::string& body : bad) {
    EXPECT_FALSE(beast_decode(body).has_value()) << body;
    EXPECT_EQ(decode_in_pieces(body, {}).result, ChunkedBody::Result::kError) << body;
  }
  const std::vector<std::string> good = {
      "5;a\r\nhello\r\n0\r\n\r\n",
      "5 ; a = b ;c=\"q \\\" ;x\" ; d\r\nhello\r\n0;last\r\n\r\n",
      "5;a;b;c=d\r\nhello\r\n0\r\nx-t: 1\r\ny-t:\r\n\r\n",
  };
  for (const std::string& body : good) {
    ASSERT_EQ(beast_decode(body), std::optional<std::string>("hello")) << body;
    const Decoded d = decode_in_pieces(body, {2, 7});
    EXPECT_EQ(d.result, ChunkedBody::Result::kDone) << body;
    EXPECT_EQ(d.data, "hello") << body;
    EXPECT_EQ(d.used, body.size()) << body;
  }
}

}  // namespace
}  // namespace prefixgate::serving
