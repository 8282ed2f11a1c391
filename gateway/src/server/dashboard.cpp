// The dashboard's server side: the request-path hooks that feed LiveStats, the one-second
// sampler, and GET /stats and /dashboard. The page itself is dashboard/dashboard.html, compiled
// into the binary (dashboard_asset.h): it loads nothing from the network, and its
// Content-Security-Policy forbids it to.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>

#include "server/dashboard_asset.h"
#include "server/proxy_internal.h"

namespace prefixgate::gateway::server {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// `since` from the query string: absent = 0; a bad value is an error.
bool since_param(std::string_view target, std::int64_t& since) {
  since = 0;
  const std::optional<std::string_view> digits = serving::query_param(target, "since");
  if (!digits) return true;
  const auto [end, ec] = std::from_chars(digits->data(), digits->data() + digits->size(), since);
  return ec == std::errc() && end == digits->data() + digits->size() && since >= 0;
}

}  // namespace

void record_live_request(GatewayContext& ctx, const ProxiedRequest& p) {
  CompletedRequest r;
  r.replica = p.decision.replica;
  r.tenant = p.info.tenant.name;
  r.status = p.status;
  r.usage_seen = p.usage_seen;
  r.prompt_tokens = p.usage_prompt_tokens;
  r.cached_tokens = p.usage_cached_tokens;
  r.predicted_cached_tokens = p.decision.predicted_cached_tokens;
  r.ttft_seconds = p.ttft_seconds;
  ctx.stats->record_request(r);
  if (p.ttft_seconds >= 0 && p.usage_seen && p.usage_prompt_tokens > 0) {
    const bool hit = ctx.stats->is_cache_hit(p.usage_prompt_tokens, p.usage_cached_tokens);
    ctx.m.ttft_by_cache->observe({hit ? "hit" : "miss"}, p.ttft_seconds);
  }
}

void record_live_prep(GatewayContext& ctx, const PreparedRequest& prep) {
  if (prep.changes.empty() && prep.findings.empty()) return;
  LiveStats::PrepRecorder rec = ctx.stats->prep_recorder(unix_now_ms());
  for (const StageChange& ch : prep.changes) {
    rec.change({ch.rule, rule_mode_name(ch.mode), ch.path});
  }
  for (const PromptFinding& f : prep.findings) {
    rec.finding({f.rule, f.field, f.excerpt, f.token_offset, f.byte_offset});
  }
}

Awaitable<void> run_stats_sampler(GatewayContext& ctx) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const std::chrono::milliseconds interval(ctx.stats->options().interval_ms);
  auto next = SteadyClock::now();
  while (!ctx.draining()) {
    // Absolute deadlines, so samples stay one interval apart on average; after a stall (a
    // suspended process) start again from now rather than tick in a burst.
    next += interval;
    if (SteadyClock::now() - next > 5 * interval) next = SteadyClock::now() + interval;
    timer.expires_at(next);
    co_await timer.async_wait(kTuple);
    ctx.stats->tick(unix_now_ms(), ctx.replicas->status());
  }
}

Response dashboard_response(GatewayContext& ctx, const Request& req, std::string_view path,
                            bool keep_alive) {
  if (path == "/stats") {
    std::int64_t since = 0;
    if (!since_param(req.target(), since)) {
      return error_response(req, http::status::bad_request,
                            "since must be a non-negative integer (unix milliseconds)",
                            "invalid_value", keep_alive);
    }
    std::string body = ctx.stats->to_json(since);
    if (ctx.admission && body.ends_with('}')) {
      // The admission state is live, not sampled: one more member of the top-level object.
      body.insert(body.size() - 1, ",\"admission\":" + ctx.admission->stats_json());
    }
    Response res =
        make_response(req, http::status::ok, "application/json", std::move(body), keep_alive);
    res.set(http::field::cache_control, "no-store");
    return res;
  }
  if (path == "/") {
    Response res = make_response(req, http::status::found, "text/plain; charset=utf-8",
                                 "see /dashboard\n", keep_alive);
    res.set(http::field::location, "/dashboard");
    return res;
  }
  Response res = make_response(req, http::status::ok, "text/html; charset=utf-8",
                               std::string(dashboard_html()), keep_alive);
  res.set(http::field::cache_control, "no-cache");
  // Offline by construction: the page may talk to this gateway and nothing else.
  res.set("content-security-policy",
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
          "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'");
  res.set("x-content-type-options", "nosniff");
  return res;
}

}  // namespace prefixgate::gateway::server
