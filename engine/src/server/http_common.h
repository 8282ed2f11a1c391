// What the engine's HTTP handlers share: the serving core's vocabulary, the server-wide
// context, and the handlers the router (server.cpp) dispatches to.
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <string>

#include "prefixgate/base/status.h"
#include "prefixgate/canonicalize/chat_conversion.h"
#include "prefixgate/engine/engine_loop.h"
#include "prefixgate/serving/http.h"
#include "prefixgate/serving/metrics.h"
#include "prefixgate/serving/server.h"
#include "server/openai_protocol.h"
#include "server/server.h"

namespace prefixgate::engine::server {

namespace asio = serving::asio;
namespace beast = serving::beast;
namespace http = serving::http;
using serving::Awaitable;
using serving::Connection;
using serving::Request;
using serving::Response;
using tcp = serving::tcp;

// Metrics the HTTP layer observes itself (engine gauges are read from EngineStats).
struct ServerMetrics {
  serving::Histogram* ttft_seconds = nullptr;
  serving::Histogram* inter_token_seconds = nullptr;
  serving::Histogram* e2e_seconds = nullptr;
  serving::Counter* requests_total = nullptr;
  serving::Counter* request_errors_total = nullptr;
};

// Shared by every connection; outlives them all.
struct ServerContext {
  ServerOptions options;
  ServedModel model;
  EngineLoop* engine = nullptr;
  serving::Metrics* metrics = nullptr;
  ServerMetrics observed;
  asio::thread_pool* blocking = nullptr;  // for calls that wait on the engine thread
  const serving::HttpServer* http = nullptr;

  // Once a shutdown started: no keep-alive, long streams end.
  bool draining() const { return http->draining(); }
};

// The engine's metric catalogue (engine_metrics.cpp): gauges and counters read from
// EngineStats at each scrape, and the families the HTTP layer observes (ctx.observed).
void register_engine_metrics(ServerContext& ctx);

// /v1/completions and /v1/chat/completions. Returns whether to keep the connection.
Awaitable<bool> handle_generation(Connection& c, ServerContext& ctx, const Request& req,
                                  canon::Endpoint endpoint);
// /v1/messages (Anthropic) and /v1/responses (OpenAI Responses): converted into their chat
// equivalent, run, answered in the client's API shape. Returns whether to keep the connection.
Awaitable<bool> handle_agent_api(Connection& c, ServerContext& ctx, const Request& req,
                                 canon::Api api);
// /v1/kv_events: streams until the client leaves or the server drains. Returns false.
Awaitable<bool> handle_kv_events(Connection& c, ServerContext& ctx, const Request& req);

}  // namespace prefixgate::engine::server
