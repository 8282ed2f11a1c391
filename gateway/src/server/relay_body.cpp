// A complete upstream response, forwarded as-is with the gateway's headers added; its usage is
// read for the audit and the metrics.
#include "server/proxy_internal.h"

namespace prefixgate::gateway::server {

Awaitable<bool> relay_body(Connection& c, const Request& req, ProxiedRequest& p, Exchange& ex) {
  GatewayContext& ctx = c.ctx;
  std::string body;
  const bool read = co_await ex.read_all(body, 256u << 20);
  if (!read) {
    ctx.replicas->finish(p.decision, p.prep.block_hashes, false, uncached_prompt_tokens(p));
    ctx.m.upstream_failures->add({p.replica_name, "body"});
    p.status = 502;
    record_done(ctx, p);
    Response res = error_response(req, http::status::bad_gateway,
                                  "the upstream replica failed while sending its response",
                                  "upstream_unavailable", false);
    add_gateway_headers(res, p.info, p.replica_name, p.overhead);
    co_await serving::write_response(c.io, std::move(res));
    co_return false;
  }
  ctx.replicas->finish(p.decision, p.prep.block_hashes, false, uncached_prompt_tokens(p));
  const UpstreamAnswerParser& up = ex.answer();
  // The answer's head as text, in the connection's head buffer (nothing else writes to the
  // client before it is sent): the bytes a Response built by the same calls would give.
  serving::HeadText res(c.io.head_scratch, up.result(), req.version());
  res.set(http::field::content_type, up.content_type());
  res.keep_alive(p.info.keep_alive);
  res.set("x-prefixgate-route-reason", route_reason_name(p.decision.reason));
  res.set("x-prefixgate-predicted-cached-tokens",
          std::to_string(p.decision.predicted_cached_tokens));
  add_gateway_headers(res, p.info, p.replica_name, p.overhead);
  ex.finish();
  if (p.status == 200) {
    // Only the usage object's fields are read, the members before it passed over by their
    // structure: the answer's text can be long.
    if (auto counts = answer_usage_counts(body)) record_usage(ctx, p, *counts);
  }
  release_admission(p);
  res.prepare_payload(body.size());
  const bool written = co_await serving::write_response(c.io, res, body);
  record_done(ctx, p);
  co_return written&& p.info.keep_alive;
}

}  // namespace prefixgate::gateway::server
