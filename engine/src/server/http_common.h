// What the Beast translation units of the server share: the stream type, the per-connection
// state handlers work with, the server-wide context, and small response helpers.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>

#include "prefixgate/canonicalize/status.h"
#include "prefixgate/engine/engine_loop.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/server.h"

namespace prefixgate::engine::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

template <class T>
using Awaitable = asio::awaitable<T>;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// Metrics the HTTP layer observes itself (engine gauges are read from EngineStats).
struct ServerMetrics {
  Histogram* ttft_seconds = nullptr;
  Histogram* inter_token_seconds = nullptr;
  Histogram* e2e_seconds = nullptr;
  Counter* requests_total = nullptr;
  Counter* request_errors_total = nullptr;
};

// Shared by every connection; outlives them all.
struct ServerContext {
  ServerOptions options;
  ServedModel model;
  EngineLoop* engine = nullptr;
  Metrics* metrics = nullptr;
  ServerMetrics observed;
  asio::thread_pool* blocking = nullptr;  // for calls that wait on the engine thread
  std::atomic<bool> draining{false};
};

struct Connection {
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  ServerContext& ctx;
};

// A response with `body` and the request's keep-alive, HTTP version.
Response make_response(const Request& req, http::status status, std::string content_type,
                       std::string body, bool keep_alive);
Response error_response(const Request& req, const canon::Error& error, bool keep_alive);
// Writes `res` under the write deadline. False when the client is gone.
Awaitable<bool> write_response(Connection& c, Response res);

// /v1/completions and /v1/chat/completions. Returns whether to keep the connection.
Awaitable<bool> handle_generation(Connection& c, const Request& req, canon::Endpoint endpoint);
// /v1/kv_events: streams until the client leaves or the server drains. Returns false.
Awaitable<bool> handle_kv_events(Connection& c, const Request& req);

}  // namespace prefixgate::engine::server
