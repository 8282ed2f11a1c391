// /v1/completions and /v1/chat/completions: submit to the engine, follow the request's events,
// answer as one JSON body or as a server-sent event stream.
//
// While the engine works, a second branch watches the socket: a client that closes its end
// (EOF or reset) aborts the sequence at once, so its pages go back to the pool, whether or not
// we were writing to it.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <chrono>

#include "prefixgate/serving/errors.h"
#include "server/generation.h"
#include "server/http_common.h"

namespace prefixgate::engine::server {
namespace {

using namespace asio::experimental::awaitable_operators;

std::string sse(const std::string& json) {
  return "data: " + json + "\n\n";
}

// Streams chunks as text arrives. Returns false when a write failed (client gone).
Awaitable<bool> stream_events(Connection& c, const GenerationPlan& plan, Generation& g,
                              const ResponseMeta& meta) {
  using serving::write_chunk;
  const bool chat = plan.endpoint == canon::Endpoint::kChatCompletions;
  bool first = true;
  if (chat) {  // OpenAI opens a chat stream with the role
    if (!co_await write_chunk(
            c, sse(stream_chunk(plan.endpoint, meta, "", "", true, plan.include_usage)))) {
      co_return false;
    }
    first = false;
  }
  while (!g.done()) {
    co_await g.advance();
    const std::string delta = g.output().take_delta(g.done());
    if (!delta.empty()) {
      if (!co_await write_chunk(
              c, sse(stream_chunk(plan.endpoint, meta, delta, "", first, plan.include_usage)))) {
        co_return false;
      }
      first = false;
    }
  }
  std::string tail = sse(stream_chunk(plan.endpoint, meta, "", g.finish_reason(), first,
                                      plan.include_usage, g.output().stop_string()));
  if (plan.include_usage) tail += sse(stream_usage_chunk(plan.endpoint, meta, g.usage()));
  tail += "data: [DONE]\n\n";
  if (!co_await write_chunk(c, tail)) co_return false;
  co_return co_await serving::write_last_chunk(c);
}

}  // namespace

Awaitable<bool> handle_generation(Connection& c, ServerContext& ctx, const Request& req,
                                  canon::Endpoint endpoint) {
  const bool keep_alive = req.keep_alive() && !ctx.draining();
  auto plan = plan_generation(req.body(), endpoint, ctx.model);
  if (!plan) {
    ctx.observed.request_errors_total->add();
    Response res = serving::error_response(req, plan.error(), keep_alive);
    co_return co_await serving::write_response(c, std::move(res)) && keep_alive;
  }
  auto bridge = std::make_shared<RequestBridge>(c.stream.get_executor());
  const std::uint64_t id = ctx.engine->submit(plan->request, bridge->sink());
  Generation g(ctx, *plan, bridge, id);
  const ResponseMeta meta = make_response_meta(endpoint, ctx.model.name);
  tcp::socket& socket = c.stream.socket();

  if (!plan->stream) {
    c.stream.expires_never();  // generation takes as long as it takes; the watcher sees leavers
    auto result = co_await (run_to_end(g) || serving::watch_disconnect(socket));
    if (result.index() == 1) {
      ctx.engine->abort(id);
      co_return false;
    }
    Response res =
        serving::make_response(req, http::status::ok, "application/json",
                               completion_body(endpoint, meta, g.output().text(), g.finish_reason(),
                                               g.usage(), g.output().stop_string()),
                               keep_alive);
    co_return co_await serving::write_response(c, std::move(res)) && keep_alive;
  }

  serving::StreamHead head =
      serving::make_stream_head(req, http::status::ok, "text/event-stream", keep_alive);
  bool ok = co_await serving::write_stream_head(c, head);
  if (ok) {
    auto result = co_await (stream_events(c, *plan, g, meta) || serving::watch_disconnect(socket));
    ok = result.index() == 0 && std::get<0>(result);
  }
  if (!ok) ctx.engine->abort(id);  // unknown ids and ended requests are ignored
  co_return ok&& keep_alive;
}

}  // namespace prefixgate::engine::server
