// POST /v1/chat/completions, /v1/completions, /v1/messages and /v1/responses: prepare (parse,
// canonicalize, hash), route, forward with retries on another replica until the first response
// byte, relay the answer. A Messages or Responses request goes to an upstream that serves its
// API as it is (canonicalized), to any other as its chat equivalent, whose reply is translated.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "server/proxy_internal.h"

namespace prefixgate::gateway::server {
namespace {

// Letters become 'x' and digits '9' (the shape of a timestamp or an id, not its value), at most
// 32 bytes: enough to recognize what a rule found without copying prompts into the log.
std::string redacted_excerpt(std::string_view text) {
  constexpr std::size_t kMaxBytes = 32;
  std::string out;
  for (char ch : text.substr(0, kMaxBytes)) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isdigit(u)) {
      out += '9';
    } else if (std::isalpha(u) || u >= 0x80) {
      out += 'x';
    } else {
      out += std::isspace(u) ? ' ' : ch;
    }
  }
  if (text.size() > kMaxBytes) out += "...";
  return out;
}

// Counts what the canonicalization stage found; samples observe-mode changes and prompt
// findings to the log (at most canonicalization.log_samples_per_s lines per second).
void record_prep(GatewayContext& ctx, const RequestInfo& info, const PreparedRequest& prep) {
  record_live_prep(ctx, prep);
  // The clock is read once for the request's samples, and only when one is asked for.
  SteadyClock::time_point now{};
  const auto log_allowed = [&] {
    if (now == SteadyClock::time_point{}) now = SteadyClock::now();
    return ctx.finding_log.allow(now);
  };
  if (!prep.template_error.empty()) {
    if (log_allowed()) {
      spdlog::info("chat template refused request {}: {} (routed on its text)", info.request_id,
                   prep.template_error);
    }
  }
  for (const StageChange& ch : prep.changes) {
    ctx.m.canonicalization->add({ch.rule, rule_mode_name(ch.mode)});
    if (ch.mode == RuleMode::kObserve && log_allowed()) {
      // The detail is the stage's own wording ("2 timestamps rounded to 1h"), no prompt text.
      spdlog::info("canonicalization finding (observe): request {} rule {} path {} detail \"{}\"",
                   info.request_id, ch.rule, ch.path, ch.detail);
    }
  }
  // A run of findings of one rule (a system prompt's several times) is one series lookup.
  for (std::size_t i = 0; i < prep.findings.size();) {
    std::size_t run = 1;
    while (i + run < prep.findings.size() && prep.findings.rule(i + run) == prep.findings.rule(i)) {
      ++run;
    }
    ctx.m.findings->add({prep.findings.rule(i)}, static_cast<double>(run));
    i += run;
  }
  for (const PromptFinding& f : prep.findings) {
    if (log_allowed()) {
      spdlog::info("prompt finding: request {} rule {} path {} excerpt \"{}\"", info.request_id,
                   f.rule, f.field, redacted_excerpt(f.excerpt));
    }
  }
}

UpstreamPost upstream_post(const Request& req, const RequestInfo& info, json::SplicedJson body,
                           std::string_view target) {
  const std::string_view accept = serving::field_value(req, http::field::accept);
  return UpstreamPost{target, accept.empty() ? std::string_view("*/*") : accept, info.request_id,
                      std::move(body)};
}

}  // namespace

void record_usage(GatewayContext& ctx, ProxiedRequest& p, const json::Value& usage) {
  if (const std::optional<UsageCounts> counts = usage_counts(usage)) record_usage(ctx, p, *counts);
}

void record_usage(GatewayContext& ctx, ProxiedRequest& p, const UsageCounts& counts) {
  const std::size_t prompt = counts.prompt;
  const std::size_t cached = counts.cached;
  p.series->prompt_tokens().add(static_cast<double>(prompt));
  p.series->cached_tokens().add(static_cast<double>(cached));
  p.usage_seen = true;
  p.usage_prompt_tokens = prompt;
  p.usage_cached_tokens = cached;
  p.usage_completion_tokens = counts.completion;
  // The tokens per minute charge becomes what was used (streams too: the gateway asks for their
  // usage chunk); applied when the slot is released, before the client sees the end.
  if (p.admission != nullptr && *p.admission) {
    (*p.admission)->settle(p.usage_prompt_tokens + p.usage_completion_tokens);
  }
  const double predicted = static_cast<double>(p.decision.predicted_cached_tokens);
  ctx.m.prediction_error->observe(std::fabs(static_cast<double>(cached) - predicted));
  spdlog::debug("request {} replica {} reason {} predicted_cached {} cached {} prompt {}",
                p.info.request_id, p.replica_name, route_reason_name(p.decision.reason),
                p.decision.predicted_cached_tokens, cached, prompt);
}

void record_done(GatewayContext& ctx, const ProxiedRequest& p) {
  const double e2e = std::chrono::duration<double>(SteadyClock::now() - p.info.received).count();
  p.series->e2e().observe(e2e);
  p.series->overhead().observe(static_cast<double>(p.overhead.count()) * 1e-6);
  p.series->requests(p.status).add();
  record_live_request(ctx, p);
}

Awaitable<bool> handle_completion(Connection& c, const Request& req, RequestInfo& info,
                                  canon::Api api) {
  GatewayContext& ctx = c.ctx;
  auto prep = prepare_request(req.body(), api, info.tenant, ctx.prep,
                              serving::readable_past_end(req.body()));
  if (!prep) {
    const Error& e = prep.error();
    co_return co_await write_response(c, info, error_response(req, e, info.keep_alive));
  }
  record_prep(ctx, info, *prep);
  info.session_key = session_key_for(info.session_key, prep->parsed.body, info.api_key);
  const bool agent_api = api == canon::Api::kMessages || api == canon::Api::kResponses;
  // The request in the upstream's API, made once (the bodies are moved into them): as sent to
  // the path it came on, and for an agent API also its chat equivalent.
  std::optional<UpstreamPost> as_sent, as_chat;
  const auto request_for = [&](bool native) -> const UpstreamPost& {
    std::optional<UpstreamPost>& slot = native ? as_sent : as_chat;
    if (!slot) {
      json::SplicedJson& body =
          agent_api && native ? prep->agent.native_body : prep->upstream_body();
      const std::string_view target =
          native ? std::string_view(req.target().data(), req.target().size())
                 : std::string_view(canon::api_path(canon::Api::kChatCompletions));
      slot = upstream_post(req, info, std::move(body), target);
    }
    return *slot;
  };
  const RouteRequest route_req{prep->block_hashes, prep->prompt_tokens, prep->block_size,
                               info.session_key};
  // Admission (tenant limits, the gateway-wide bound and its queue), once the prompt's tokens
  // are known; the ticket ends the request's slot when this coroutine ends.
  std::optional<AdmissionTicket> ticket;
  if (ctx.admission) {
    const std::size_t tokens =
        prep->prompt_tokens +
        completion_estimate(prep->parsed.body, ctx.config.admission.default_max_tokens);
    AdmissionResult a = co_await ctx.admission->admit(c.stream.socket(), info.tenant.name, tokens);
    if (a.refusal) {
      Response res = error_response(req, static_cast<http::status>(a.refusal->status),
                                    a.refusal->message, a.refusal->code, info.keep_alive);
      res.set(http::field::retry_after, std::to_string(a.refusal->retry_after_s));
      co_return co_await write_response(c, info, std::move(res));
    }
    if (!a.ticket) co_return false;  // the client left while queued
    ticket.emplace(std::move(*a.ticket));
  }

  std::vector<ReplicaId> tried;
  UpstreamFailure last_failure = UpstreamFailure::kNone;
  for (std::size_t attempt = 0; attempt < ctx.config.max_attempts; ++attempt) {
    const auto now = SteadyClock::now();
    const RouteDecision d = ctx.replicas->route(route_req, tried, now);
    if (d.reason == RouteReason::kNoHealthyReplica) break;
    tried.push_back(d.replica);
    ctx.m.decisions->add({ctx.replicas->policy_name(), route_reason_name(d.reason)});
    ctx.stats->record_decision(d.reason);
    ProxiedRequest p{*prep, info, d, ctx.replicas->upstream(d.replica).url,
                     std::chrono::duration_cast<std::chrono::microseconds>(now - info.received)};
    p.series = &ctx.m.request_series->at({info.route, p.replica_name, info.tenant.name});
    p.series->predicted_cached_tokens().add(static_cast<double>(d.predicted_cached_tokens));

    const bool native = !agent_api || serves_agent_apis(ctx.replicas->upstream(d.replica));
    p.translated = !native;
    Exchange ex(ctx, d.replica, &c.upstream);
    const UpstreamFailure f = co_await ex.open(request_for(native));
    const bool draining_upstream = f == UpstreamFailure::kNone &&
                                   ex.answer().result() == http::status::service_unavailable &&
                                   attempt + 1 < ctx.config.max_attempts;
    if (f != UpstreamFailure::kNone || draining_upstream) {
      ctx.replicas->finish(d, prep->block_hashes, /*prefilled=*/false,
                           prep->prompt_tokens - d.predicted_cached_tokens);
      if (f != UpstreamFailure::kNone) {
        ctx.replicas->record_failure(d.replica);
        ctx.m.upstream_failures->add({p.replica_name, upstream_failure_name(f)});
        last_failure = f;
      }
      ctx.m.retries->add({draining_upstream ? "upstream_503" : upstream_failure_name(f)});
      spdlog::warn("request {}: replica {} failed before the first byte ({}); retrying",
                   info.request_id, p.replica_name,
                   draining_upstream ? "503" : upstream_failure_name(f));
      continue;
    }
    ctx.replicas->record_success(d.replica);
    p.status = static_cast<int>(ex.answer().result_int());
    const bool is_sse = ex.answer().content_type().starts_with("text/event-stream");
    if (ticket) p.admission = &ticket;  // settled by record_usage(), released by the relay
    if (p.translated) {
      if (prep->stream && is_sse) co_return co_await relay_translated_stream(c, req, p, ex);
      co_return co_await relay_translated_body(c, req, p, ex);
    }
    if (prep->stream && is_sse) co_return co_await relay_stream(c, req, p, ex);
    co_return co_await relay_body(c, req, p, ex);
  }

  if (ticket) ticket->settle(0);  // no replica answered: nothing was used
  Response res;
  if (tried.empty()) {
    res = error_response(req, http::status::service_unavailable,
                         "no healthy upstream replica is available", "no_healthy_upstream",
                         info.keep_alive);
  } else if (last_failure == UpstreamFailure::kTimeout) {
    res = error_response(
        req, http::status::gateway_timeout,
        "upstream replicas did not answer in time (" + std::to_string(tried.size()) + " tried)",
        "upstream_timeout", info.keep_alive);
  } else {
    res = error_response(req, http::status::bad_gateway,
                         "upstream replicas failed (" + std::to_string(tried.size()) +
                             " tried, last: " + upstream_failure_name(last_failure) + ")",
                         "upstream_unavailable", info.keep_alive);
  }
  co_return co_await write_response(c, info, std::move(res));
}

}  // namespace prefixgate::gateway::server
