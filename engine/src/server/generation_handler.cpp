// /v1/completions and /v1/chat/completions: submit to the engine, follow the request's events,
// answer as one JSON body or as a server-sent event stream.
//
// While the engine works, a second branch watches the socket: a client that closes its end
// (EOF or reset) aborts the sequence at once, so its pages go back to the pool, whether or not
// we were writing to it.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <chrono>

#include "prefixgate/serving/errors.h"
#include "server/http_common.h"
#include "server/request_bridge.h"
#include "server/text_output.h"

namespace prefixgate::engine::server {
namespace {

using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Follows one request's events; the text, finish reason and usage build up here.
class Generation {
 public:
  Generation(ServerContext& ctx, const GenerationPlan& plan, std::shared_ptr<RequestBridge> bridge,
             std::uint64_t id)
      : ctx_(ctx),
        bridge_(std::move(bridge)),
        id_(id),
        output_(*ctx.model.tokenizer,
                TextOutputOptions{plan.request.sampling.stop, !plan.request.sampling.ignore_eos,
                                  ctx.model.eos_token}) {
    usage_.prompt_tokens = plan.request.prompt.size();
  }

  // Waits for more events and applies them. Returns once something changed.
  Awaitable<void> advance() {
    for (const GenerationEvent& e : co_await bridge_->next()) apply(e);
  }

  bool done() const { return !finish_reason_.empty(); }
  const std::string& finish_reason() const { return finish_reason_; }
  TextOutput& output() { return output_; }
  Usage usage() const {
    Usage u = usage_;
    u.completion_tokens = output_.token_count();
    return u;
  }

 private:
  void apply(const GenerationEvent& e) {
    if (done()) return;  // events after a stop string (the abort that follows it)
    if (!saw_prompt_ && e.prompt_tokens > 0) {
      usage_.prompt_tokens = e.prompt_tokens;
      usage_.cached_tokens = e.cached_tokens;
      saw_prompt_ = true;
    }
    if (!e.tokens.empty()) {
      if (e.first_token)
        ctx_.observed.ttft_seconds->observe(seconds_since(start_));
      else if (saw_token_)
        ctx_.observed.inter_token_seconds->observe(seconds_since(last_token_));
      saw_token_ = true;
      last_token_ = Clock::now();
    }
    for (canon::TokenId t : e.tokens) output_.append(t);
    if (output_.stopped()) {
      finish_reason_ = "stop";
      ctx_.engine->abort(id_);  // the stop string ended it; free its pages now
    } else if (e.finished != FinishReason::kNone) {
      finish_reason_ = finish_reason_text(e.finished);
    }
    if (done()) ctx_.observed.e2e_seconds->observe(seconds_since(start_));
  }

  ServerContext& ctx_;
  std::shared_ptr<RequestBridge> bridge_;
  std::uint64_t id_;
  TextOutput output_;
  Usage usage_;
  std::string finish_reason_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_token_;
  bool saw_prompt_ = false;
  bool saw_token_ = false;
};

Awaitable<void> run_to_end(Generation& g) {
  while (!g.done()) co_await g.advance();
}

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
  std::string tail =
      sse(stream_chunk(plan.endpoint, meta, "", g.finish_reason(), first, plan.include_usage));
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
    Response res = serving::make_response(
        req, http::status::ok, "application/json",
        completion_body(endpoint, meta, g.output().text(), g.finish_reason(), g.usage()),
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
