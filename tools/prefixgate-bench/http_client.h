// The benchmark's HTTP client (Boost.Beast on one Asio thread): one coroutine per request, so a
// single process holds thousands of concurrent streams. A request is sent with `stream: true`
// (and, for the chat APIs, `stream_options.include_usage`), and the server-sent events are timed
// as they arrive: time to first token, the gaps between content events, the prompt, cached and
// completion tokens of the usage each API ends its stream with (a chat usage chunk, Messages'
// message_delta: input + cache_read + cache_creation input tokens, Responses' last event:
// input_tokens_details.cached_tokens), and the gateway's x-prefixgate-replica /
// x-prefixgate-route-reason headers.
//
//   auto target = bench::parse_url("http://127.0.0.1:8080");
//   bench::RequestRecord rec;
//   co_await bench::send_streaming(*target, turn, clock_zero, timeout, rec);
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "prefixgate/base/status.h"
#include "workload.h"

namespace prefixgate::bench {

struct HttpTarget {
  std::string host;  // as given (Host header)
  std::uint16_t port = 80;
  std::string base_path;                    // "" or "/prefix" (no trailing slash)
  boost::asio::ip::tcp::endpoint endpoint;  // resolved once
};

// "http://HOST:PORT[/PATH]"; resolves HOST. https is not supported (a benchmark of the gateway
// on loopback; put a TLS terminator's plain side in front of it).
Result<HttpTarget> parse_url(const std::string& url);

using BenchClock = std::chrono::steady_clock;

// What one request did. Times are seconds since the run's start.
struct RequestRecord {
  std::size_t order = 0;  // issue order in the run
  bool warmup = false;
  double sent_s = 0;
  double first_token_s = -1;  // first chunk with content; -1 if none
  double done_s = 0;
  std::vector<double> gaps_s;  // between consecutive content chunks
  std::size_t prompt_tokens = 0;
  std::size_t cached_tokens = 0;
  std::size_t completion_tokens = 0;
  std::string replica;       // x-prefixgate-replica ("" when absent: a direct engine)
  std::string route_reason;  // x-prefixgate-route-reason
  // "" on success, else its kind: connect, write, read, timeout, http_<status>, stream_error,
  // bad_response (no usage or unparsable events).
  std::string error;
  std::string error_detail;  // an error response's body (its first 512 bytes), for the report
};

boost::asio::awaitable<void> send_streaming(const HttpTarget& target, const Turn& turn,
                                            BenchClock::time_point zero,
                                            std::chrono::milliseconds timeout,
                                            RequestRecord& record);

// A blocking request with a deadline, for setup and scraping (health, metrics), with the admin
// key of PREFIXGATE_ADMIN_KEY when it is set. status 0 when the connection or the exchange
// failed.
struct SimpleReply {
  int status = 0;
  std::string body;
};
SimpleReply http_get(const HttpTarget& target, const std::string& path,
                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace prefixgate::bench
