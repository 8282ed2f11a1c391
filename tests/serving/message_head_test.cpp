// append_head writes a message's head byte for byte as Beast's serializer does, so answers and
// upstream requests written with it (one gathered write) are the messages Beast would send.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

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

// HeadText, the head written as text by the request paths, against a Beast message built by the
// same calls (and what write_response() adds: Server, and keep_alive(false) in a drain), over
// random statuses, methods, versions, fields with spaces to trim, empty values and bodies, and
// keep_alive() called zero to three times between the fields.
TEST(MessageHead, HeadTextMatchesBeastBuiltBySameCalls) {
  std::mt19937 rng(11);
  const char* names[] = {"Content-Type", "x-request-id", "Cache-Control", "x-prefixgate-replica",
                         "Accept",       "User-Agent",   "Host",          "X-A"};
  const char* values[] = {"application/json", " padded\t", "", "a, b", "\t", "pg-1-2", "x y"};
  const unsigned statuses[] = {200, 201, 299, 404, 429, 502, 503, 101, 204, 304};
  const http::verb verbs[] = {http::verb::get,     http::verb::post,  http::verb::put,
                              http::verb::delete_, http::verb::trace, http::verb::options};
  std::string text;
  for (int i = 0; i < 2000; ++i) {
    const unsigned version = 10 + static_cast<unsigned>(rng() % 2);
    const bool is_request = rng() % 2 == 0;
    const auto status = static_cast<http::status>(statuses[rng() % 10]);
    const http::verb verb = verbs[rng() % 6];
    const std::string target = "/v1/p" + std::to_string(rng() % 100);
    std::string body(rng() % 3 == 0 ? 0 : rng() % 50, 'b');
    const bool no_body = is_request ? verb == http::verb::trace
                                    : status == http::status::continue_ ||
                                          status == http::status::switching_protocols ||
                                          status == http::status::no_content ||
                                          status == http::status::not_modified;
    if (no_body && rng() % 4 != 0) body.clear();

    Request req{verb, target, version};
    Response res{status, version};
    std::optional<HeadText> head;
    if (is_request) {
      head.emplace(text, verb, target, version);
    } else {
      head.emplace(text, status, version);
    }
    std::vector<int> order{0, 1, 2, 3, 4, 5, 6, 7};
    std::shuffle(order.begin(), order.end(), rng);
    const int fields = static_cast<int>(rng() % 7);
    for (int f = 0; f <= fields; ++f) {
      if (rng() % 3 == 0) {
        const bool keep = rng() % 2 == 0;
        req.keep_alive(keep);
        res.keep_alive(keep);
        head->keep_alive(keep);
      }
      if (f == fields) break;
      const char* value = values[rng() % 7];
      if (order[f] == 2 && rng() % 2 == 0) {
        req.set(http::field::cache_control, value);  // a known field, by its enum
        res.set(http::field::cache_control, value);
        head->set(http::field::cache_control, value);
      } else {
        req.set(names[order[f]], value);
        res.set(names[order[f]], value);
        head->set(names[order[f]], value);
      }
    }
    bool beast_threw = false;
    bool ours_threw = false;
    try {
      req.body() = body;
      res.body() = body;
      is_request ? req.prepare_payload() : res.prepare_payload();
    } catch (const std::invalid_argument&) {
      beast_threw = true;
    }
    try {
      head->prepare_payload(body.size());
    } catch (const std::invalid_argument&) {
      ours_threw = true;
    }
    ASSERT_EQ(ours_threw, beast_threw) << i << (is_request ? " request " : " response ")
                                       << static_cast<unsigned>(status) << ' ' << body.size();
    if (beast_threw) continue;
    if (!is_request) {
      // write_response()'s additions.
      const bool draining = rng() % 3 == 0;
      res.set(http::field::server, "prefixgate");
      head->set(http::field::server, "prefixgate");
      if (draining) {
        res.keep_alive(false);
        head->keep_alive(false);
      }
    }
    ASSERT_EQ(head->keep_alive(), is_request ? req.keep_alive() : res.keep_alive()) << i;
    head->end();
    std::string expected;
    is_request ? append_head(req, expected) : append_head(res, expected);
    ASSERT_EQ(head->text(), expected) << i;
  }
}

}  // namespace
}  // namespace prefixgate::serving
