// The reply of a chat upstream to the chat equivalent of a Messages or Responses request,
// translated back into the client's API by canonicalize/'s reply writers: a whole body, or a
// stream rewritten event by event as chat chunks arrive (with the same backpressure as
// relay_stream.cpp). Upstream errors keep their status; Messages clients get Anthropic's error
// shape.
#include <chrono>

#include "prefixgate/canonicalize/anthropic_reply.h"
#include "prefixgate/canonicalize/responses_reply.h"
#include "prefixgate/canonicalize/sse.h"
#include "server/proxy_internal.h"

namespace prefixgate::gateway::server {
namespace {

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The reply's identity and what its usage and echo need, from the prepared request.
canon::MessagesReplyContext messages_context(const ProxiedRequest& p) {
  return canon::MessagesReplyContext{.id = "msg_" + p.info.request_id,
                                     .model = p.prep.agent.model,
                                     .stop_sequences = p.prep.agent.stop_sequences,
                                     .breakpoint_tokens = p.prep.agent.breakpoint_tokens};
}

canon::ResponsesReplyContext responses_context(const ProxiedRequest& p) {
  return canon::ResponsesReplyContext{.id = "resp_" + p.info.request_id,
                                      .model = p.prep.agent.model,
                                      .created_at = unix_seconds(),
                                      .echo = p.prep.agent.responses_echo};
}

bool is_messages(const ProxiedRequest& p) {
  return p.prep.api == canon::Api::kMessages;
}

// An upstream's error reply, in the client's API: Anthropic's shape for Messages; OpenAI's
// (what a chat upstream sends) as it is for Responses.
std::string error_body_for(const ProxiedRequest& p, int status, const std::string& body) {
  if (is_messages(p)) return canon::messages_error_body(status, canon::error_message_of(body));
  if (auto doc = json::parse(body); doc && doc->is_object() && doc->find("error") != nullptr) {
    return body;
  }
  return serving::openai_error_body(status, canon::error_message_of(body), "upstream_error");
}

template <class Message>
void add_route_headers(Message& res, const ProxiedRequest& p) {
  res.set("x-prefixgate-route-reason", route_reason_name(p.decision.reason));
  res.set("x-prefixgate-predicted-cached-tokens",
          std::to_string(p.decision.predicted_cached_tokens));
  add_gateway_headers(res, p.info, p.replica_name, p.overhead);
}

// Either API's stream writer, behind one face.
class StreamWriter {
 public:
  explicit StreamWriter(const ProxiedRequest& p) {
    if (is_messages(p)) {
      messages_.emplace(messages_context(p));
    } else {
      responses_.emplace(responses_context(p));
    }
  }
  void add(const canon::ChatReply& chunk, std::string& out) {
    if (messages_) {
      messages_->add(chunk, out);
    } else {
      responses_->add(chunk, out);
    }
  }
  void finish(std::string& out) {
    if (messages_) {
      messages_->finish(out);
    } else {
      responses_->finish(out);
    }
  }
  void fail(int status, std::string_view message, std::string& out) {
    if (messages_) {
      messages_->fail(status, message, out);
    } else {
      responses_->fail("upstream_error", message, out);
    }
  }
  bool finished() const { return messages_ ? messages_->finished() : responses_->finished(); }

 private:
  std::optional<canon::MessagesStreamWriter> messages_;
  std::optional<canon::ResponsesStreamWriter> responses_;
};

// Applies the upstream's events to the writer. Returns the number that carried content.
std::size_t translate_events(const std::vector<canon::SseEvent>& events, StreamWriter& writer,
                             std::string& out, GatewayContext& ctx, ProxiedRequest& p) {
  std::size_t content = 0;
  for (const canon::SseEvent& e : events) {
    if (writer.finished()) break;
    if (e.data == "[DONE]") {
      writer.finish(out);
      break;
    }
    // A token's plain chunk (text or tool calls) is read without a tree; any other (usage, an
    // error, logprobs) is parsed whole.
    if (std::optional<canon::ChatReply> plain = canon::parse_plain_chat_chunk(e.data)) {
      if (!plain->text.empty() || !plain->tool_calls.empty()) ++content;
      writer.add(*plain, out);
      continue;
    }
    auto doc = json::parse(e.data);
    if (!doc || !doc->is_object()) continue;
    if (const json::Value* error = doc->find("error"); error != nullptr && !error->is_null()) {
      writer.fail(502, canon::error_message_of(e.data), out);
      continue;
    }
    auto chunk = canon::parse_chat_chunk(*doc);
    if (!chunk) continue;
    if (chunk->usage) {
      if (const json::Value* usage = doc->find("usage")) record_usage(ctx, p, *usage);
    }
    if (!chunk->text.empty() || !chunk->tool_calls.empty()) ++content;
    writer.add(*chunk, out);
  }
  return content;
}

}  // namespace

Awaitable<bool> relay_translated_body(Connection& c, const Request& req, ProxiedRequest& p,
                                      Exchange& ex) {
  GatewayContext& ctx = c.ctx;
  std::string body;
  const bool read = co_await ex.read_all(body, 256u << 20);
  ctx.replicas->finish(p.decision, p.prep.block_hashes, false, uncached_prompt_tokens(p));
  if (read) ex.finish();
  int status = static_cast<int>(ex.answer().result_int());
  std::string out;
  if (!read) {
    ctx.m.upstream_failures->add({p.replica_name, "body"});
    status = 502;
    out = serving::error_body(serving::error_shape_for(req.target()), status,
                              "the upstream replica failed while sending its response",
                              "upstream_unavailable");
  } else if (status != 200) {
    out = error_body_for(p, status, body);
  } else {
    auto doc = json::parse(body);
    auto reply = doc ? canon::parse_chat_reply(*doc) : Result<canon::ChatReply>(doc.error());
    if (!reply) {
      status = 502;
      out = serving::error_body(
          serving::error_shape_for(req.target()), status,
          "the upstream's reply is not a chat completion: " + reply.error().message,
          "bad_upstream_response");
    } else {
      if (const json::Value* usage = doc->find("usage")) record_usage(ctx, p, *usage);
      out = is_messages(p) ? canon::messages_body(*reply, messages_context(p))
                           : canon::responses_body(*reply, responses_context(p));
    }
  }
  p.status = status;
  Response res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(read && p.info.keep_alive);
  add_route_headers(res, p);
  res.body() = std::move(out);
  res.prepare_payload();
  const bool keep = res.keep_alive();
  release_admission(p);
  const bool written = co_await serving::write_response(c.io, std::move(res));
  record_done(ctx, p);
  co_return written&& keep;
}

Awaitable<bool> relay_translated_stream(Connection& c, const Request& req, ProxiedRequest& p,
                                        Exchange& ex) {
  GatewayContext& ctx = c.ctx;
  serving::StreamHead head =
      serving::make_stream_head(req, ex.answer().result(), "text/event-stream", p.info.keep_alive);
  add_route_headers(head, p);
  bool client_ok = co_await serving::write_stream_head(c.io, head);

  StreamWriter writer(p);
  canon::SseReader reader;
  std::vector<canon::SseEvent> events;
  bool prefilled = false;
  bool upstream_ok = true;
  std::string piece, out;
  // Read to the upstream's end even after [DONE], so its connection can be pooled again.
  while (client_ok && !ex.done()) {
    piece.clear();
    if (!co_await ex.read_some(piece)) {
      upstream_ok = false;
      break;
    }
    events.clear();
    reader.feed(piece, events);
    out.clear();
    if (translate_events(events, writer, out, ctx, p) > 0 && !prefilled) {
      prefilled = true;
      ctx.replicas->prefilled(p.decision, p.prep.block_hashes, uncached_prompt_tokens(p));
      p.ttft_seconds = std::chrono::duration<double>(SteadyClock::now() - p.info.received).count();
      ctx.m.ttft->observe({p.replica_name}, p.ttft_seconds);
    }
    if (!out.empty()) client_ok = co_await serving::write_chunk(c.io, out);
  }
  ctx.replicas->finish(p.decision, p.prep.block_hashes, prefilled,
                       prefilled ? 0 : uncached_prompt_tokens(p));
  if (!client_ok) {
    p.status = 499;  // the client left; closing the upstream connection aborts the sequence
    record_done(ctx, p);
    co_return false;
  }
  release_admission(p);
  out.clear();
  if (!upstream_ok) {
    ctx.m.upstream_failures->add({p.replica_name, "mid_stream"});
    ctx.replicas->record_failure(p.decision.replica);
    writer.fail(502, "the upstream replica failed mid-stream", out);
    p.status = 502;
  } else {
    if (ex.done()) ex.finish();
    writer.finish(out);  // an upstream that ended without [DONE] ends the client's stream too
  }
  if (!out.empty()) client_ok = co_await serving::write_chunk(c.io, out);
  const bool ended = co_await serving::write_last_chunk(c.io);
  record_done(ctx, p);
  co_return upstream_ok&& client_ok&& ended&& p.info.keep_alive;
}

}  // namespace prefixgate::gateway::server
