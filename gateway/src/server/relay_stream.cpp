// A server-sent event stream, forwarded event by event as the upstream produces it. The next
// upstream read starts only once the client has taken the previous events (backpressure). The
// usage chunk the gateway asked for is read, and dropped when the client did not ask for it; a
// native Messages or Responses stream is forwarded whole, its final usage read. A failure after
// the header has gone out ends the client's stream with an SSE error event.
#include "prefixgate/canonicalize/anthropic_reply.h"
#include "prefixgate/canonicalize/sse.h"
#include "server/proxy_internal.h"
#include "server/usage_counts.h"

namespace prefixgate::gateway::server {
namespace {

// Moves the complete events at the front of `pending` to `out`, keeping those the client
// should see; reads the usage chunk. Returns the number of events that carried content.
// The usage of a native Messages stream's message_delta (the whole message's) or a Responses
// stream's last event (its response's): read, the event forwarded as it is.
void read_agent_usage(std::string_view event, GatewayContext& ctx, ProxiedRequest& p) {
  const bool messages = event.starts_with("event: message_delta\n");
  const bool responses = event.starts_with("event: response.completed\n") ||
                         event.starts_with("event: response.incomplete\n");
  if (!messages && !responses) return;
  const std::size_t data = event.find("\ndata: ");
  if (data == std::string_view::npos) return;
  auto doc = json::parse(event.substr(data + 7, event.size() - data - 9));
  if (!doc || !doc->is_object()) return;
  const json::Value* holder = responses ? doc->find("response") : &*doc;
  const json::Value* usage = holder != nullptr ? holder->find("usage") : nullptr;
  if (usage != nullptr) record_usage(ctx, p, *usage);
}

std::size_t take_events(std::string& pending, std::string& out, GatewayContext& ctx,
                        ProxiedRequest& p) {
  std::size_t forwarded = 0;
  std::size_t pos = 0;
  const bool agent_api =
      p.prep.api == canon::Api::kMessages || p.prep.api == canon::Api::kResponses;
  for (;;) {
    const std::size_t end = pending.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string_view event(pending.data() + pos, end + 2 - pos);
    pos = end + 2;
    if (agent_api) {
      read_agent_usage(event, ctx, p);
      out.append(event);
      ++forwarded;
      continue;
    }
    bool keep = true;
    if (event.starts_with("data: ") && event_may_carry_usage(event)) {
      if (auto doc = json::parse(event.substr(6, event.size() - 8)); doc && doc->is_object()) {
        const json::Value* usage = doc->find("usage");
        const json::Value* choices = doc->find("choices");
        if (usage && usage->is_object()) {
          record_usage(ctx, p, *usage);
          const bool usage_only = choices && choices->is_array() && choices->as_array().empty();
          keep = p.prep.client_wants_usage || !usage_only;
          if (keep && !p.prep.client_wants_usage) {
            doc->set("usage", json::Null{});  // a content chunk that also carried usage
            out += "data: " + json::to_json(*doc) + "\n\n";
            ++forwarded;
            continue;
          }
        }
      }
    }
    if (keep) {
      out.append(event);
      ++forwarded;
    }
  }
  pending.erase(0, pos);
  return forwarded;
}

Awaitable<bool> write_chunk(Connection& c, const std::string& payload) {
  return serving::write_chunk(c.io, payload);
}

}  // namespace

std::string stream_error_event(canon::Api api, std::string_view message) {
  std::string out;
  if (api == canon::Api::kMessages) {
    canon::append_sse(out, "error", canon::messages_error_body(502, message));
  } else if (api == canon::Api::kResponses) {
    canon::append_sse(out, "error",
                      json::to_json(json::Object{{"type", "error"},
                                                 {"code", "upstream_stream_error"},
                                                 {"message", message},
                                                 {"param", json::Null{}}}));
  } else {
    canon::append_sse(
        out, "",
        json::to_json(json::Object{{"error", json::Object{{"message", message},
                                                          {"type", "server_error"},
                                                          {"param", json::Null{}},
                                                          {"code", "upstream_stream_error"}}}}));
  }
  return out;
}

Awaitable<bool> relay_stream(Connection& c, const Request& req, ProxiedRequest& p, Exchange& ex) {
  GatewayContext& ctx = c.ctx;
  const UpstreamAnswerParser& up = ex.answer();
  serving::StreamHead head =
      serving::make_stream_head(req, up.result(), up.content_type(), p.info.keep_alive);
  head.set("x-prefixgate-route-reason", route_reason_name(p.decision.reason));
  head.set("x-prefixgate-predicted-cached-tokens",
           std::to_string(p.decision.predicted_cached_tokens));
  add_gateway_headers(head, p.info, p.replica_name, p.overhead);
  bool client_ok = co_await serving::write_stream_head(c.io, head);

  bool prefilled = false;
  bool upstream_ok = true;
  std::string pending, out;
  while (client_ok && !ex.done()) {
    const bool read = co_await ex.read_some(pending);
    if (!read) {
      upstream_ok = false;
      break;
    }
    out.clear();
    if (take_events(pending, out, ctx, p) > 0 && !prefilled) {
      prefilled = true;
      ctx.replicas->prefilled(p.decision, p.prep.block_hashes, uncached_prompt_tokens(p));
      p.ttft_seconds = std::chrono::duration<double>(SteadyClock::now() - p.info.received).count();
      ctx.m.ttft->observe({p.replica_name}, p.ttft_seconds);
    }
    if (!out.empty()) client_ok = co_await write_chunk(c, out);
  }
  ctx.replicas->finish(p.decision, p.prep.block_hashes, prefilled,
                       prefilled ? 0 : uncached_prompt_tokens(p));
  if (!client_ok) {
    // The client left: closing the upstream connection (Exchange's destructor) makes the
    // engine abort the sequence and free its pages.
    p.status = 499;
    record_done(ctx, p);
    co_return false;
  }
  release_admission(p);
  if (!upstream_ok) {
    ctx.m.upstream_failures->add({p.replica_name, "mid_stream"});
    ctx.replicas->record_failure(p.decision.replica);
    const std::string error =
        stream_error_event(p.prep.api, "the upstream replica failed mid-stream");
    const std::string tail = pending.empty() ? error : pending + "\n\n" + error;
    co_await write_chunk(c, tail);
    p.status = 502;
  } else {
    ex.finish();
    if (!pending.empty()) client_ok = co_await write_chunk(c, pending);
  }
  const bool ended = co_await serving::write_last_chunk(c.io);
  record_done(ctx, p);
  co_return upstream_ok&& client_ok&& ended&& p.info.keep_alive;
}

}  // namespace prefixgate::gateway::server
