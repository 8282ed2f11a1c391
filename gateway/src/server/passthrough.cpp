// Requests without a prompt to route: GET /v1/models merged from the healthy upstreams, any
// other /v1/* forwarded to one healthy upstream, and POST /prefixgate/explain/*, which shows
// the routing decision a completion, Messages or Responses request would get, without sending it.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/write.hpp>
#include <set>

#include "prefixgate/canonicalize/block_hash.h"
#include "prefixgate/canonicalize/json.h"
#include "server/context.h"
#include "server/upstream_exchange.h"

namespace prefixgate::gateway::server {
namespace {

Response no_upstream(const Request& req, const RequestInfo& info) {
  return error_response(req, http::status::service_unavailable,
                        "no healthy upstream replica is available", "no_healthy_upstream",
                        info.keep_alive);
}

std::string list_body(json::Array data) {
  return json::to_json(json::Object{{"object", "list"}, {"data", std::move(data)}});
}

// Whether a client's header field goes on to the replica. Not the connection's own (RFC 9110
// section 7.6.1), nor the body's framing: the body was read whole and goes with a Content-Length
// of its own. Not Expect: the body goes with the header, and a replica asked for a go-ahead
// would answer `100 Continue` first, which is no answer to relay. Not the client's credentials.
bool passed_to_replica(http::field name) {
  switch (name) {
    case http::field::host:
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::content_length:
    case http::field::expect:
    case http::field::authorization: return false;
    default: return true;
  }
}

}  // namespace

Awaitable<bool> handle_models(Connection& c, const Request& req, RequestInfo& info) {
  GatewayContext& ctx = c.ctx;
  json::Array data;
  std::set<std::string> seen;
  std::size_t answered = 0;
  for (const ReplicaId r : ctx.replicas->healthy_replicas()) {
    Exchange ex(ctx, r, &c.upstream);
    Request up{http::verb::get, "/v1/models", 11};
    up.set("x-request-id", info.request_id);
    std::string body;
    // (No co_await inside || or ?: : GCC 12 miscompiles them.)
    const UpstreamFailure f = co_await ex.open(up);
    if (f != UpstreamFailure::kNone) continue;
    const bool read = co_await ex.read_all(body, 1 << 22);
    if (!read) continue;
    if (ex.answer().result() != http::status::ok) continue;
    ex.finish();
    auto doc = json::parse(body);
    const json::Value* list = doc && doc->is_object() ? doc->find("data") : nullptr;
    if (!list || !list->is_array()) continue;
    ++answered;
    for (const json::Value& m : list->as_array()) {
      const json::Value* id = m.is_object() ? m.find("id") : nullptr;
      if (id && id->is_string() && seen.insert(id->as_string()).second) data.push_back(m);
    }
  }
  if (answered == 0) co_return co_await write_response(c, info, no_upstream(req, info));
  // (Built before the co_await: GCC 12 mishandles some temporaries inside co_await.)
  std::string body = list_body(std::move(data));
  co_return co_await write_response(
      c, info,
      make_response(req, http::status::ok, "application/json", std::move(body), info.keep_alive));
}

Awaitable<bool> handle_passthrough(Connection& c, const Request& req, RequestInfo& info) {
  GatewayContext& ctx = c.ctx;
  std::vector<ReplicaId> tried;
  for (std::size_t attempt = 0; attempt < ctx.config.max_attempts; ++attempt) {
    const auto r = ctx.replicas->any_healthy(tried);
    if (!r) break;
    tried.push_back(*r);
    Exchange ex(ctx, *r, &c.upstream);
    Request up{req.method(), req.target(), 11};
    for (const auto& field : req) {
      if (!passed_to_replica(field.name())) continue;
      up.set(field.name_string(), field.value());
    }
    up.set("x-request-id", info.request_id);
    up.body() = req.body();
    const UpstreamFailure f = co_await ex.open(up);
    if (f != UpstreamFailure::kNone) {
      ctx.replicas->record_failure(*r);
      continue;
    }
    std::string body;
    const bool read = co_await ex.read_all(body, ctx.config.limits.max_body_bytes * 4);
    if (!read) break;
    ex.finish();
    const UpstreamAnswerParser& head = ex.answer();
    Response res = make_response(req, head.result(), std::string(head.content_type()),
                                 std::move(body), info.keep_alive);
    co_return co_await write_response(c, info, std::move(res), ctx.replicas->upstream(*r).url);
  }
  co_return co_await write_response(
      c, info,
      tried.empty() ? no_upstream(req, info)
                    : error_response(req, http::status::bad_gateway, "upstream replicas failed",
                                     "upstream_unavailable", info.keep_alive));
}

Awaitable<bool> handle_explain(Connection& c, const Request& req, RequestInfo& info,
                               canon::Api api) {
  GatewayContext& ctx = c.ctx;
  auto prep = prepare_request(req.body(), api, info.tenant, ctx.prep,
                              serving::readable_past_end(req.body()));
  if (!prep) {
    const Error& e = prep.error();
    co_return co_await write_response(c, info, error_response(req, e, info.keep_alive));
  }
  info.session_key = session_key_for(info.session_key, prep->parsed.body, info.api_key);
  const RouteRequest route_req{prep->block_hashes, prep->prompt_tokens, prep->block_size,
                               info.session_key};
  const RouteDecision d = ctx.replicas->route(route_req, {}, SteadyClock::now(), true);
  json::Array hashes;
  for (std::uint64_t h : prep->block_hashes) hashes.push_back(canon::hash_hex(h));
  json::Array changes;
  for (const StageChange& ch : prep->changes) {
    changes.push_back(json::Object{{"rule", ch.rule},
                                   {"mode", rule_mode_name(ch.mode)},
                                   {"path", ch.path},
                                   {"detail", ch.detail}});
  }
  const bool routed = d.reason != RouteReason::kNoHealthyReplica;
  // What every replica holds of the prompt, as the index knows it (confirmed or predicted).
  json::Array per_replica;
  const auto matches = ctx.replicas->matches(prep->block_hashes, SteadyClock::now());
  for (ReplicaId r = 0; r < matches.size(); ++r) {
    const auto tokens = [&](std::size_t blocks) {
      return static_cast<double>(std::min(blocks * prep->block_size, prep->prompt_tokens));
    };
    per_replica.push_back(json::Object{{"replica", ctx.replicas->upstream(r).url},
                                       {"cached_tokens", tokens(matches[r].blocks)},
                                       {"offloaded_tokens", tokens(matches[r].offloaded)}});
  }
  json::Object out{
      {"prompt_tokens", static_cast<double>(prep->prompt_tokens)},
      {"block_size", static_cast<double>(prep->block_size)},
      {"block_hashes", std::move(hashes)},
      {"cache_salt", prep->parsed.cache_salt},
      {"canonicalization", std::move(changes)},
      {"replica", routed ? json::Value(ctx.replicas->upstream(d.replica).url) : json::Value()},
      {"reason", route_reason_name(d.reason)},
      {"predicted_cached_tokens", static_cast<double>(d.predicted_cached_tokens)},
      {"replicas", std::move(per_replica)},
      {"upstream_body", prep->upstream_body().flattened()}};
  if (api == canon::Api::kMessages || api == canon::Api::kResponses) {
    out.push_back({"native_body", prep->agent.native_body.flattened()});
    out.push_back({"breakpoint_tokens", static_cast<double>(prep->agent.breakpoint_tokens)});
  }
  co_return co_await write_response(c, info,
                                    make_response(req, http::status::ok, "application/json",
                                                  json::to_json(out), info.keep_alive));
}

}  // namespace prefixgate::gateway::server
