// Shared by the completion handler and its relays: a whole body or an event stream, as the
// upstream answered it, or translated from a chat upstream into the client's API.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "prefixgate/canonicalize/json.h"
#include "server/context.h"
#include "server/upstream_exchange.h"
#include "server/usage_counts.h"

namespace prefixgate::gateway::server {

// One request on its way through a chosen replica.
struct ProxiedRequest {
  const PreparedRequest& prep;
  RequestInfo& info;
  RouteDecision decision;
  // The upstream URL, for headers and metric labels: a view of the replica set's (which
  // outlives every request), not a copy per request.
  std::string_view replica_name;
  std::chrono::microseconds overhead{0};
  int status = 0;
  // A Messages or Responses request sent to a chat upstream as its chat equivalent: the reply
  // is translated back.
  bool translated = false;
  // Filled as the response passes, for the live stats at the end.
  double ttft_seconds = -1;  // streamed: arrival to the first event
  bool usage_seen = false;
  std::size_t usage_prompt_tokens = 0;
  std::size_t usage_cached_tokens = 0;
  std::size_t usage_completion_tokens = 0;  // completion_tokens, or output_tokens
  // The request's admission slot and token charge (null when admission control is off):
  // record_usage() settles the charge, release_admission() ends the slot.
  std::optional<AdmissionTicket>* admission = nullptr;
  // The series its metrics go to, by route, replica and tenant (found once, when it is routed).
  const RequestSeries* series = nullptr;
};

// Ends the request's admission slot once its upstream answer is all read, before the last
// writes to the client: a client that sends its next request on reading the end of this one
// must find the slot (and the settled token charge) already given back.
inline void release_admission(ProxiedRequest& p) {
  if (p.admission != nullptr) p.admission->reset();
}

// The prefill work the request adds to its replica's in-flight count (ReplicaSet::route added
// exactly this): the prompt less the tokens the replica is predicted to hold.
inline std::size_t uncached_prompt_tokens(const ProxiedRequest& p) {
  return p.prep.prompt_tokens - std::min(p.prep.prompt_tokens, p.decision.predicted_cached_tokens);
}

// Forwards a complete (non-streaming) response. Returns whether to keep the client connection.
Awaitable<bool> relay_body(Connection& c, const Request& req, ProxiedRequest& p, Exchange& ex);
// Forwards a server-sent event stream as it arrives, stripping the usage chunk the gateway
// asked for when the client did not. Returns whether to keep the client connection.
Awaitable<bool> relay_stream(Connection& c, const Request& req, ProxiedRequest& p, Exchange& ex);

// Whether an upstream serves the Messages and Responses APIs itself, as prefixgate-engine does.
// Others are sent the chat equivalent and their replies translated back.
inline bool serves_agent_apis(const UpstreamConfig& upstream) {
  return upstream.kind == ReplicaKind::kPrefixgate;
}

// Forwards a chat upstream's reply translated into the client's API (Messages or Responses):
// a whole body, or a stream re-written event by event. Returns whether to keep the connection.
Awaitable<bool> relay_translated_body(Connection& c, const Request& req, ProxiedRequest& p,
                                      Exchange& ex);
Awaitable<bool> relay_translated_stream(Connection& c, const Request& req, ProxiedRequest& p,
                                        Exchange& ex);

// The SSE event that ends a client's stream when the upstream failed mid-way, in the shape of
// the client's API.
std::string stream_error_event(canon::Api api, std::string_view message);

// Records the engine-reported usage (usage_counts.h has the shapes read); nothing when the
// usage is not an object.
void record_usage(GatewayContext& ctx, ProxiedRequest& p, const json::Value& usage);
void record_usage(GatewayContext& ctx, ProxiedRequest& p, const UsageCounts& counts);
// Records the request's end: status counter, latency, audit log line.
void record_done(GatewayContext& ctx, const ProxiedRequest& p);

// The live stats behind /stats and /dashboard (dashboard.cpp): a finished request; what the
// canonicalization stage and the prompt linter found in a prepared one.
void record_live_request(GatewayContext& ctx, const ProxiedRequest& p);
void record_live_prep(GatewayContext& ctx, const PreparedRequest& prep);

}  // namespace prefixgate::gateway::server
