// append_head writes a message's head byte for byte as Beast's serializer does, so answers and
// upstream requests written with it (one gathered write) are the messages Beast would send.
#include <gtest/gtest.h>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <random>
#include <string>

#include "prefixgate/serving/http.h"

namespace prefixgate::serving {
namespace {

// Everything Beast's serializer emits for `msg`: the head and the body.
template <bool isRequest, class Body>
std::string beast_bytes(http::message<isRequest, Body>& msg) {
  http::serializer<isRequest, Body> sr{msg};
  std::string out;
  boost::system::error_code ec;
  while (!sr.is_done()) {
    sr.next(ec, [&](boost::system::error_code&, const auto& buffers) {
      out += beast::buffers_to_string(buffers);
      sr.consume(beast::buffer_bytes(buffers));
    });
    if (ec) return "error: " + ec.message();
  }
  return out;
}

template <bool isRequest, class Body>
std::string our_bytes(const http::message<isRequest, Body>& msg) {
  std::string out;
  append_head(msg, out);
  return out + msg.body();
}

TEST(MessageHead, ResponsesMatchBeast) {
  Response ok{http::status::ok, 11};
  ok.set(http::field::content_type, "application/json");
  ok.set(http::field::server, "prefixgate");
  ok.set("x-prefixgate-replica", "r0");
  ok.keep_alive(true);
  ok.body() = R"({"id":"x"})";
  ok.prepare_payload();
  EXPECT_EQ(our_bytes(ok), beast_bytes(ok));

  Response old{http::status::too_many_requests, 10};
  old.keep_alive(true);  // HTTP/1.0 spells keep-alive out
  old.set(http::field::retry_after, "3");
  old.body() = "slow down";
  old.prepare_payload();
  EXPECT_EQ(our_bytes(old), beast_bytes(old));

  Response custom{http::status::bad_gateway, 11};
  custom.reason("Upstream Gone");
  custom.keep_alive(false);
  custom.prepare_payload();
  EXPECT_EQ(our_bytes(custom), beast_bytes(custom));
  EXPECT_TRUE(our_bytes(custom).starts_with("HTTP/1.1 502 Upstream Gone\r\n"));
}

TEST(MessageHead, RequestsMatchBeast) {
  Request post{http::verb::post, "/v1/chat/completions?x=1", 11};
  post.set(http::field::host, "127.0.0.1:8000");
  post.set(http::field::content_type, "application/json");
  post.set("X-Custom-Header", "a, b");
  post.keep_alive(true);
  post.body() = R"({"model":"m","messages":[]})";
  post.prepare_payload();
  EXPECT_EQ(our_bytes(post), beast_bytes(post));

  Request get{http::verb::get, "/health", 10};
  get.keep_alive(false);
  EXPECT_EQ(our_bytes(get), beast_bytes(get));

  Request unknown;
  unknown.method_string("PURGE");
  unknown.target("/cache");
  unknown.version(11);
  unknown.set(http::field::host, "h");
  EXPECT_EQ(our_bytes(unknown), beast_bytes(unknown));
}

// Random statuses, versions, field names and values (known and unknown fields, repeats).
TEST(MessageHead, RandomMessagesMatchBeast) {
  std::mt19937 rng(7);
  const char* names[] = {"Content-Type", "x-trace",     "Set-Cookie", "Cache-Control",
                         "X-A",          "Retry-After", "Vary",       "x-prefixgate-route-reason"};
  for (int i = 0; i < 500; ++i) {
    // Statuses and methods that may carry a body (Beast refuses one on 1xx, 204, 304, TRACE).
    unsigned status = 200 + static_cast<unsigned>(rng() % 400);
    if (status == 204 || status == 304) status = 200;
    const http::verb verbs[] = {http::verb::get,   http::verb::post,    http::verb::put,
                                http::verb::patch, http::verb::delete_, http::verb::options};
    Response res{static_cast<http::status>(status), 10 + static_cast<unsigned>(rng() % 2)};
    Request req{verbs[rng() % 6], "/p" + std::to_string(rng()),
                10 + static_cast<unsigned>(rng() % 2)};
    const int fields = static_cast<int>(rng() % 6);
    for (int f = 0; f < fields; ++f) {
      const std::string value(rng() % 40, static_cast<char>('a' + rng() % 26));
      res.insert(names[rng() % 8], value);
      req.insert(names[rng() % 8], value);
    }
    res.keep_alive(rng() % 2 == 0);
    req.keep_alive(rng() % 2 == 0);
    res.body() = std::string(rng() % 100, 'b');
    req.body() = std::string(rng() % 100, 'q');
    res.prepare_payload();
    req.prepare_payload();
    ASSERT_EQ(our_bytes(res), beast_bytes(res)) << i;
    ASSERT_EQ(our_bytes(req), beast_bytes(req)) << i;
  }
}

}  // namespace
}  // namespace prefixgate::serving
