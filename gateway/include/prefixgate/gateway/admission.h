// Admission control: per-tenant limits (requests and tokens per minute as token buckets,
// concurrent requests) and a gateway-wide bound on requests in flight, past which requests wait
// in a FairQueue (round robin across tenants) for a slot.
//
// The rules, in the order a request meets them:
//   1. Its tenant's limits (`tenant_limits.<tenant>`, else `tenant_limits.default`; a key left
//      out is no limit): max_concurrent counts the tenant's requests in the gateway, queued or in
//      flight; requests_per_minute charges 1; tokens_per_minute charges the request's estimate
//      (prompt tokens + its max_tokens, or a default). Any limit it would break rejects it (429)
//      with the time until that limit allows it; a rejected request is charged nothing.
//   2. The gateway-wide bound (admission.max_inflight; 0 = none): below it, admitted; at it,
//      queued. A full queue (admission.max_queue) drops the newest waiter of the tenant holding
//      the most places if that tenant holds at least two more than the newcomer's, else rejects
//      the newcomer.
//   3. A request that ends frees its slot for the next waiter in turn, and settles its token
//      charge to what it used (more is taken, even into debt; less is given back; unknown keeps
//      the estimate). A waiter that gives up (queue timeout, client gone) or is dropped is given
//      back its whole charge.
//
// Pure and single-threaded, time passed in: the server's AdmissionControl holds a lock around
// it and wakes the waiters it names.
//
//   AdmissionCore core(config);
//   Arrival a = core.arrive(id, "team-a", prompt + max_tokens, now);
//   ...  for (Id next : core.finish(id, used_tokens, now)) wake(next);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "prefixgate/gateway/fair_queue.h"
#include "prefixgate/gateway/token_bucket.h"

namespace prefixgate::gateway {

// One tenant's limits; 0 = no limit (the key left out of the configuration).
struct TenantLimits {
  std::size_t requests_per_minute = 0;
  std::size_t tokens_per_minute = 0;
  std::size_t max_concurrent = 0;
};

struct AdmissionConfig {
  // Requests in flight (sent upstream, answer not finished) across the gateway. 0: no bound and
  // no queue, the gateway as it always was: the engines queue what they cannot run.
  std::size_t max_inflight = 0;
  std::size_t max_queue = 1024;  // requests waiting for a slot, all tenants together
  std::chrono::milliseconds queue_timeout{30000};
  // The completion part of a request's token estimate when it sets no max_tokens,
  // max_completion_tokens or max_output_tokens; an explicit value is charged as given.
  std::size_t default_max_tokens = 1024;
  // By tenant name; "default" applies to every tenant without an entry (and to requests with no
  // tenant). Each tenant has its own buckets: the default is a per-tenant limit, not a shared one.
  std::map<std::string, TenantLimits> tenant_limits;

  // Whether admission control does anything: a limit or a bound is configured.
  bool enabled() const { return max_inflight > 0 || !tenant_limits.empty(); }
};

// What stopped a request; the names are the configuration keys (and metric labels).
enum class Limit {
  kNone,
  kMaxConcurrent,
  kRequestsPerMinute,
  kTokensPerMinute,
  kQueueFull,
  kQueueTimeout,
};
const char* limit_name(Limit limit);

struct Arrival {
  enum class Outcome { kAdmitted, kQueued, kRejected };
  Outcome outcome = Outcome::kAdmitted;
  Limit limit = Limit::kNone;  // kRejected: which
  // kRejected: how long until the limit would let it through (at least one second for
  // max_concurrent and a full queue, which have no clock); Clock::duration::max() when never
  // (a token estimate larger than the tenant's whole tokens_per_minute).
  TokenBucket::Clock::duration retry_after{};
  std::size_t limit_value = 0;  // kRejected by a tenant limit: its configured value
  // A waiter dropped from a full queue to make room for this one: tell it kQueueFull.
  std::optional<FairQueue::Id> dropped = {};
};

class AdmissionCore {
 public:
  using Clock = TokenBucket::Clock;
  using Id = FairQueue::Id;

  explicit AdmissionCore(AdmissionConfig config);

  // A new request (`id` unique among those in the gateway) of `tenant`, estimated at `tokens`.
  Arrival arrive(Id id, const std::string& tenant, std::size_t tokens, Clock::time_point now);
  // A queued request that gives up (queue timeout, client gone): out of the queue, its charge
  // given back. False when `id` is not queued (admitted meanwhile: finish() it instead).
  bool leave(Id id, Clock::time_point now);
  // An admitted request ended, having used `used_tokens` (nullopt: unknown, the estimate
  // stands). Returns the waiters admitted into the freed slot, in order.
  std::vector<Id> finish(Id id, std::optional<std::size_t> used_tokens, Clock::time_point now);

  const AdmissionConfig& config() const { return config_; }
  // The limits that apply to `tenant` (its entry, else the default, else none).
  const TenantLimits& limits_for(const std::string& tenant) const;
  std::size_t inflight() const { return inflight_; }
  std::size_t queued() const { return queue_.size(); }

  struct TenantState {
    TenantLimits limits;
    std::optional<TokenBucket> requests;  // requests_per_minute
    std::optional<TokenBucket> tokens;    // tokens_per_minute
    std::size_t inflight = 0;
    std::size_t queued = 0;
  };
  // Tenants seen recently (those idle with full buckets are forgotten), by name.
  const std::map<std::string, TenantState>& tenants() const { return tenants_; }

 private:
  struct Entry {
    std::string tenant;
    std::size_t tokens = 0;  // charged
    bool queued = false;
  };
  TenantState& tenant_state(const std::string& tenant, Clock::time_point now);
  void refund(const Entry& e, TenantState& t, Clock::time_point now);
  void forget_idle_tenants(Clock::time_point now);

  AdmissionConfig config_;
  TenantLimits unlimited_;
  std::map<std::string, TenantState> tenants_;
  std::unordered_map<Id, Entry> entries_;  // admitted or queued
  FairQueue queue_;
  std::size_t inflight_ = 0;
  std::size_t arrivals_ = 0;
};

}  // namespace prefixgate::gateway
