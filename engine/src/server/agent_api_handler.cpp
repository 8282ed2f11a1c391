// POST /v1/messages (Anthropic Messages) and /v1/responses (OpenAI Responses, stateless): the
// request is converted into its Chat Completions equivalent (canonicalize/'s anthropic.h,
// responses_api.h), rendered and run exactly as that chat request would be (so the two share
// cached prefixes), and answered in the client's API shape by canonicalize/'s reply writers,
// with the engine's own prompt and cached token counts.
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "prefixgate/canonicalize/anthropic.h"
#include "prefixgate/canonicalize/anthropic_reply.h"
#include "prefixgate/canonicalize/responses_api.h"
#include "prefixgate/canonicalize/responses_reply.h"
#include "prefixgate/serving/errors.h"
#include "server/generation.h"
#include "server/http_common.h"

namespace prefixgate::engine::server {
namespace {

using namespace asio::experimental::awaitable_operators;

// A request of either API, converted.
struct AgentRequest {
  canon::Api api = canon::Api::kMessages;
  json::Value body;  // as sent
  canon::ChatConversion chat;
  std::string model;
  std::vector<std::string> stop_sequences;  // Messages
};

Result<AgentRequest> parse_agent_request(canon::Api api, std::string_view body) {
  AgentRequest out;
  out.api = api;
  if (api == canon::Api::kMessages) {
    auto m = canon::parse_messages_request(body);
    if (!m) return m.error();
    out.body = std::move(m->body);
    out.chat = std::move(m->chat);
    out.model = std::move(m->model);
    out.stop_sequences = std::move(m->stop_sequences);
  } else {
    auto r = canon::parse_responses_request(body);
    if (!r) return r.error();
    out.body = std::move(r->body);
    out.chat = std::move(r->chat);
    out.model = std::move(r->model);
  }
  return out;
}

canon::ChatUsage chat_usage(const Usage& u) {
  return canon::ChatUsage{u.prompt_tokens, u.completion_tokens, u.cached_tokens};
}

// How one request's reply is labelled: its id, model, and what the API's usage or echo needs.
struct ReplyContexts {
  std::optional<canon::MessagesReplyContext> messages;
  std::optional<canon::ResponsesReplyContext> responses;
};

ReplyContexts reply_contexts(const AgentRequest& request, const GenerationPlan& plan,
                             const std::string& served) {
  const ResponseMeta meta = make_response_meta(canon::Endpoint::kChatCompletions, served);
  const std::string suffix = meta.id.substr(meta.id.find('-') + 1);
  const std::string model = request.model.empty() ? served : request.model;
  ReplyContexts out;
  if (request.api == canon::Api::kMessages) {
    out.messages = canon::MessagesReplyContext{.id = "msg_" + suffix,
                                               .model = model,
                                               .stop_sequences = request.stop_sequences,
                                               .breakpoint_tokens = plan.breakpoint_tokens};
  } else {
    out.responses = canon::ResponsesReplyContext{.id = "resp_" + suffix,
                                                 .model = model,
                                                 .created_at = meta.created,
                                                 .echo = canon::responses_echo(request.body)};
  }
  return out;
}

// The reply writers of one request, and its whole-body form.
class Replier {
 public:
  explicit Replier(ReplyContexts contexts)
      : messages_(std::move(contexts.messages)),
        responses_(std::move(contexts.responses)),
        message_stream_(messages_.value_or(canon::MessagesReplyContext{})),
        response_stream_(responses_.value_or(canon::ResponsesReplyContext{})) {}

  std::string body(const canon::ChatReply& reply) const {
    return messages_ ? canon::messages_body(reply, *messages_)
                     : canon::responses_body(reply, *responses_);
  }
  void add(const canon::ChatReply& chunk, std::string& out) {
    if (messages_) {
      message_stream_.add(chunk, out);
    } else {
      response_stream_.add(chunk, out);
    }
  }
  void finish(std::string& out) {
    if (messages_) {
      message_stream_.finish(out);
    } else {
      response_stream_.finish(out);
    }
  }

 private:
  std::optional<canon::MessagesReplyContext> messages_;
  std::optional<canon::ResponsesReplyContext> responses_;
  canon::MessagesStreamWriter message_stream_;
  canon::ResponsesStreamWriter response_stream_;
};

// The reply so far as a chat reply: the text released since the last call, and at the end the
// finish reason, the stop string and the usage.
canon::ChatReply next_chunk(Generation& g, bool with_usage) {
  canon::ChatReply chunk;
  chunk.text = g.output().take_delta(g.done());
  if (with_usage) {  // the prompt's counts, for message_start: nothing generated yet
    chunk.usage = chat_usage(g.usage());
    chunk.usage->completion_tokens = 0;
  }
  if (g.done()) {
    chunk.finish_reason = g.finish_reason();
    chunk.stop_string = g.output().stop_string();
    chunk.usage = chat_usage(g.usage());
  }
  return chunk;
}

// Streams the reply's events as text arrives. Returns false when a write failed.
Awaitable<bool> stream_reply(Connection& c, Generation& g, Replier& replier) {
  bool opened = false;
  std::string out;
  while (!g.done()) {
    co_await g.advance();
    // The first events wait for the prompt's counts, so message_start carries them.
    if (!opened && !g.prompt_known() && !g.done()) continue;
    out.clear();
    replier.add(next_chunk(g, !opened), out);
    opened = true;
    if (g.done()) replier.finish(out);
    if (!out.empty() && !co_await serving::write_chunk(c, out)) co_return false;
  }
  co_return co_await serving::write_last_chunk(c);
}

}  // namespace

Awaitable<bool> handle_agent_api(Connection& c, ServerContext& ctx, const Request& req,
                                 canon::Api api) {
  const bool keep_alive = req.keep_alive() && !ctx.draining();
  const auto refuse = [&](const Error& e) -> Awaitable<bool> {
    ctx.observed.request_errors_total->add();
    co_return co_await serving::write_response(c, serving::error_response(req, e, keep_alive)) &&
        keep_alive;
  };
  auto request = parse_agent_request(api, req.body());
  if (!request) co_return co_await refuse(request.error());
  auto chat = canon::parse_request_value(request->chat.body, canon::Endpoint::kChatCompletions);
  if (!chat) co_return co_await refuse(chat.error());
  auto plan = plan_chat_generation(*chat, ctx.model, &request->chat);
  if (!plan) co_return co_await refuse(plan.error());

  auto bridge = std::make_shared<RequestBridge>(c.stream.get_executor());
  const std::uint64_t id = ctx.engine->submit(plan->request, bridge->sink());
  Generation g(ctx, *plan, bridge, id);
  Replier replier(reply_contexts(*request, *plan, ctx.model.name));
  tcp::socket& socket = c.stream.socket();

  if (!plan->stream) {
    c.stream.expires_never();  // generation takes as long as it takes; the watcher sees leavers
    auto result = co_await (run_to_end(g) || serving::watch_disconnect(socket));
    if (result.index() == 1) {
      ctx.engine->abort(id);
      co_return false;
    }
    canon::ChatReply reply;
    reply.text = g.output().text();
    reply.finish_reason = g.finish_reason();
    reply.stop_string = g.output().stop_string();
    reply.usage = chat_usage(g.usage());
    std::string body = replier.body(reply);
    co_return co_await serving::write_response(
        c, serving::make_response(req, http::status::ok, "application/json", std::move(body),
                                  keep_alive)) &&
        keep_alive;
  }

  serving::StreamHead head =
      serving::make_stream_head(req, http::status::ok, "text/event-stream", keep_alive);
  bool ok = co_await serving::write_stream_head(c, head);
  if (ok) {
    auto result = co_await (stream_reply(c, g, replier) || serving::watch_disconnect(socket));
    ok = result.index() == 0 && std::get<0>(result);
  }
  if (!ok) ctx.engine->abort(id);
  co_return ok&& keep_alive;
}

}  // namespace prefixgate::engine::server
