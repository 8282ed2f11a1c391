// A real HTTP/1.1 client for the server tests (Beast, async ops bounded by a deadline, so a
// broken server fails a test instead of hanging it). The client's code is compiled once, in
// test_client.cpp: instantiated in every test file, Beast was most of their compile time.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::engine::server::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
  bool ok = false;  // a complete response arrived
};

class Client {
 public:
  explicit Client(std::uint16_t port, std::chrono::seconds timeout = std::chrono::seconds(10));
  ~Client();

  bool connected() const { return connected_; }

  bool send(http::verb verb, const std::string& target, const std::string& body = {},
            const std::string& raw_content_type = "application/json");
  bool read_header();
  // Reads more of the body; false at the end of the message, on EOF or on the deadline.
  bool read_some();

  // Reads until `pred(body so far)` holds; false if the response ended or timed out first.
  template <class Pred>
  bool read_until(Pred pred) {
    while (!pred(parser_->get().body())) {
      if (!read_some()) return pred(parser_->get().body());
    }
    return true;
  }

  HttpReply read_all();

  int status() const { return static_cast<int>(parser_->get().result_int()); }
  std::string header(std::string_view name) const { return std::string(parser_->get()[name]); }
  const std::string& body() const { return parser_->get().body(); }
  void close();
  // A second request on the same connection needs a fresh parser.
  void reset_parser();

 private:
  // Starts one async operation with a completion handler and runs it to the deadline.
  template <class Start>
  bool run(Start start);

  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::chrono::seconds timeout_;
  bool connected_ = false;
};

HttpReply request(std::uint16_t port, http::verb verb, const std::string& target,
                  const std::string& body = {});
inline HttpReply post(std::uint16_t port, const std::string& target, const std::string& body) {
  return request(port, http::verb::post, target, body);
}
inline HttpReply get(std::uint16_t port, const std::string& target) {
  return request(port, http::verb::get, target);
}

// The JSON payloads of `data: ...` lines of an SSE body, and whether it ended with [DONE].
struct SseEvents {
  std::vector<json::Value> chunks;
  bool done = false;
  bool well_formed = true;
};
inline SseEvents parse_sse(const std::string& body) {
  SseEvents out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    const std::size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      out.well_formed = false;
      break;
    }
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) {
      out.well_formed = false;
      continue;
    }
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    auto v = json::parse(data);
    if (!v) {
      out.well_formed = false;
      continue;
    }
    out.chunks.push_back(std::move(*v));
  }
  return out;
}

// Newline-delimited JSON lines.
inline std::vector<json::Value> parse_ndjson(const std::string& body) {
  std::vector<json::Value> out;
  std::size_t pos = 0;
  for (std::size_t nl; (nl = body.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    auto v = json::parse(body.substr(pos, nl - pos));
    if (v) out.push_back(std::move(*v));
  }
  return out;
}

// The reply's body as JSON; a body that does not parse fails the test (and gives null).
inline json::Value parse_body(const HttpReply& r) {
  auto v = json::parse(r.body);
  EXPECT_TRUE(v.ok()) << r.body;
  return v ? *v : json::Value();
}

inline const json::Value& at(const json::Value& v, std::string_view key) {
  static const json::Value null;
  const json::Value* f = v.find(key);
  return f ? *f : null;
}
inline double num(const json::Value& v, std::string_view key) {
  const json::Value& f = at(v, key);
  return f.is_number() ? f.as_number().value : -1;
}
inline std::string str(const json::Value& v, std::string_view key) {
  const json::Value& f = at(v, key);
  return f.is_string() ? f.as_string() : std::string("<not a string>");
}

}  // namespace prefixgate::engine::server::testing
