// Admission control on the request path: AdmissionCore (prefixgate/gateway/admission.h: tenant
// limits, the gateway-wide bound, the fair queue) under one mutex, with the waiting done the
// Asio way. A queued request's coroutine waits on a timer of its own, on its connection's strand,
// racing serving::watch_disconnect(): a freed slot is handed over under the lock (the core picks
// the next tenant in turn) and the waiter woken by cancelling its timer on its strand; the
// timer's expiry is the queue timeout; a client that closes its connection leaves the queue at
// once. No thread ever blocks: a waiting request holds a coroutine frame, not a thread.
//
// When no limit and no bound are configured, GatewayContext::admission is null and the request
// path takes no lock at all.
//
//   auto a = co_await ctx.admission->admit(c.stream.socket(), tenant, prompt + max_tokens);
//   if (a.refusal) answer a.refusal->status with Retry-After: a.refusal->retry_after_s;
//   else if (!a.ticket) the client left;  else forward, then a.ticket->settle(used_tokens).
//   // the ticket's destruction ends the request: its slot goes to the next waiter.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "prefixgate/canonicalize/json.h"
#include "prefixgate/gateway/admission.h"
#include "prefixgate/serving/http.h"
#include "prefixgate/serving/metrics.h"

namespace prefixgate::gateway::server {

struct AdmissionState;

// An admitted request's slot and token charge. Destroying it ends the request (AdmissionCore::
// finish): the charge is settled and the slot handed to the next waiter. It owns a share of the
// controller's state, so it may outlive the gateway's context (a coroutine frame destroyed last).
class AdmissionTicket {
 public:
  AdmissionTicket(std::shared_ptr<AdmissionState> state, FairQueue::Id id);
  AdmissionTicket(AdmissionTicket&& other) noexcept;
  AdmissionTicket& operator=(AdmissionTicket&&) = delete;
  ~AdmissionTicket();
  // The tokens the request used (prompt + completion, as its answer reported them); without a
  // call the estimate it was charged stands.
  void settle(std::size_t used_tokens) { used_tokens_ = used_tokens; }

 private:
  std::shared_ptr<AdmissionState> state_;
  FairQueue::Id id_ = 0;
  std::optional<std::size_t> used_tokens_;
};

// Why a request was not admitted, ready for an error answer.
struct AdmissionRefusal {
  Limit limit = Limit::kNone;
  int status = 429;               // 429: the tenant's limit; 503: the gateway's queue
  std::string code;               // "requests_per_minute_exceeded", "queue_timeout", ...
  std::string message;            // names the limit and its value
  std::size_t retry_after_s = 1;  // the Retry-After header: rounded up, at least 1
};

struct AdmissionResult {
  std::optional<AdmissionTicket> ticket;
  std::optional<AdmissionRefusal> refusal;  // neither: the client left while queued
};

class AdmissionControl {
 public:
  explicit AdmissionControl(AdmissionConfig config);
  ~AdmissionControl();

  // prefixgate_admission_* and prefixgate_tenant_limit in /metrics (at start-up).
  void register_metrics(serving::Metrics& metrics);
  // Admits, queues (waiting here, watching `client` for a disconnect) or refuses a request of
  // `tenant` estimated at `tokens`. Call on the client connection's strand.
  serving::Awaitable<AdmissionResult> admit(serving::tcp::socket& client, const std::string& tenant,
                                            std::size_t tokens);
  // The "admission" object of GET /stats: the bound, and each tenant's limits and counts.
  std::string stats_json() const;
  // The server stopped: wake nobody any more (their coroutines are being destroyed).
  void close();

 private:
  std::shared_ptr<AdmissionState> state_;
};

// The completion part of a request's token estimate: its max_completion_tokens or max_tokens
// (the chat equivalent of Messages' max_tokens and Responses' max_output_tokens), else
// `default_max_tokens`.
std::size_t completion_estimate(const json::Value& chat_body, std::size_t default_max_tokens);

}  // namespace prefixgate::gateway::server
