// AdmissionCore: the tenant checks, the gateway-wide bound and the hand-over of freed slots.
// Every change of a count happens here, under the owner's lock, so a slot is never lost or
// given twice: a slot passes from a finishing request straight to the waiter popped for it.
#include "prefixgate/gateway/admission.h"

#include <algorithm>

#include "prefixgate/base/check.h"

namespace prefixgate::gateway {
namespace {

using Clock = AdmissionCore::Clock;

// How often (in arrivals) tenants with nothing in flight and full buckets are forgotten, so
// that tenants named by a header cannot grow the map without bound.
constexpr std::size_t kForgetEvery = 1024;

}  // namespace

const char* limit_name(Limit limit) {
  switch (limit) {
    case Limit::kNone: return "none";
    case Limit::kMaxConcurrent: return "max_concurrent";
    case Limit::kRequestsPerMinute: return "requests_per_minute";
    case Limit::kTokensPerMinute: return "tokens_per_minute";
    case Limit::kQueueFull: return "queue_full";
    case Limit::kQueueTimeout: return "queue_timeout";
  }
  return "none";
}

AdmissionCore::AdmissionCore(AdmissionConfig config) : config_(std::move(config)) {}

const TenantLimits& AdmissionCore::limits_for(const std::string& tenant) const {
  auto it = config_.tenant_limits.find(tenant);
  if (it == config_.tenant_limits.end()) it = config_.tenant_limits.find("default");
  return it == config_.tenant_limits.end() ? unlimited_ : it->second;
}

AdmissionCore::TenantState& AdmissionCore::tenant_state(const std::string& tenant,
                                                        Clock::time_point now) {
  auto it = tenants_.find(tenant);
  if (it != tenants_.end()) return it->second;
  TenantState t;
  t.limits = limits_for(tenant);
  constexpr auto kMinute = std::chrono::minutes(1);
  if (t.limits.requests_per_minute > 0) {
    t.requests.emplace(static_cast<double>(t.limits.requests_per_minute), kMinute, now);
  }
  if (t.limits.tokens_per_minute > 0) {
    t.tokens.emplace(static_cast<double>(t.limits.tokens_per_minute), kMinute, now);
  }
  return tenants_.emplace(tenant, std::move(t)).first->second;
}

void AdmissionCore::forget_idle_tenants(Clock::time_point now) {
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    TenantState& t = it->second;
    const bool idle = t.inflight == 0 && t.queued == 0 && (!t.requests || t.requests->full(now)) &&
                      (!t.tokens || t.tokens->full(now));
    it = idle ? tenants_.erase(it) : std::next(it);
  }
}

Arrival AdmissionCore::arrive(Id id, const std::string& tenant, std::size_t tokens,
                              Clock::time_point now) {
  if (++arrivals_ % kForgetEvery == 0) forget_idle_tenants(now);
  TenantState& t = tenant_state(tenant, now);
  Arrival a;
  const auto reject = [&](Limit limit, Clock::duration retry_after, std::size_t value) {
    a.outcome = Arrival::Outcome::kRejected;
    a.limit = limit;
    a.retry_after = retry_after;
    a.limit_value = value;
    return a;
  };
  // 1. The tenant's limits; nothing is taken unless all of them pass.
  if (t.limits.max_concurrent > 0 && t.inflight + t.queued >= t.limits.max_concurrent) {
    return reject(Limit::kMaxConcurrent, std::chrono::seconds(1), t.limits.max_concurrent);
  }
  if (t.requests) {
    if (const auto wait = t.requests->wait_for(1, now); wait > Clock::duration::zero()) {
      return reject(Limit::kRequestsPerMinute, wait, t.limits.requests_per_minute);
    }
  }
  if (t.tokens) {
    if (const auto wait = t.tokens->wait_for(static_cast<double>(tokens), now);
        wait > Clock::duration::zero()) {
      return reject(Limit::kTokensPerMinute, wait, t.limits.tokens_per_minute);
    }
  }
  // 2. The gateway-wide bound.
  const bool slot_free = config_.max_inflight == 0 || inflight_ < config_.max_inflight;
  if (!slot_free && queue_.size() >= config_.max_queue) {
    const std::optional<FairQueue::Tail> longest = queue_.longest();
    if (!longest || longest->waiting < t.queued + 2) {
      return reject(Limit::kQueueFull, std::chrono::seconds(1), config_.max_queue);
    }
    // Longest-queue drop: the tenant holding the most places gives up its newest.
    a.dropped = longest->newest;
    const bool left = leave(longest->newest, now);
    PG_DCHECK(left, "the longest queue's newest waiter is queued");
  }
  if (t.requests) t.requests->take(1, now);
  if (t.tokens) t.tokens->take(static_cast<double>(tokens), now);
  Entry e{tenant, tokens, !slot_free};
  entries_.emplace(id, std::move(e));
  if (slot_free) {
    ++t.inflight;
    ++inflight_;
    a.outcome = Arrival::Outcome::kAdmitted;
  } else {
    ++t.queued;
    queue_.push(tenant, id);
    a.outcome = Arrival::Outcome::kQueued;
  }
  return a;
}

void AdmissionCore::refund(const Entry& e, TenantState& t, Clock::time_point now) {
  if (t.requests) t.requests->give_back(1, now);
  if (t.tokens) t.tokens->give_back(static_cast<double>(e.tokens), now);
}

bool AdmissionCore::leave(Id id, Clock::time_point now) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.queued) return false;
  const bool removed = queue_.remove(id);
  PG_DCHECK(removed, "a queued entry is in the queue");
  TenantState& t = tenants_.at(it->second.tenant);
  --t.queued;
  refund(it->second, t, now);
  entries_.erase(it);
  return true;
}

std::vector<AdmissionCore::Id> AdmissionCore::finish(Id id, std::optional<std::size_t> used_tokens,
                                                     Clock::time_point now) {
  std::vector<Id> admitted;
  auto it = entries_.find(id);
  PG_CHECK(it != entries_.end() && !it->second.queued, "finish() takes an admitted request");
  TenantState& t = tenants_.at(it->second.tenant);
  if (t.tokens && used_tokens) {
    const double charged = static_cast<double>(it->second.tokens);
    const double used = static_cast<double>(*used_tokens);
    if (used > charged) t.tokens->take(used - charged, now);
    if (used < charged) t.tokens->give_back(charged - used, now);
  }
  --t.inflight;
  --inflight_;
  entries_.erase(it);
  while ((config_.max_inflight == 0 || inflight_ < config_.max_inflight) && !queue_.empty()) {
    const std::optional<Id> next = queue_.pop();
    Entry& e = entries_.at(*next);
    TenantState& nt = tenants_.at(e.tenant);
    e.queued = false;
    --nt.queued;
    ++nt.inflight;
    ++inflight_;
    admitted.push_back(*next);
  }
  return admitted;
}

}  // namespace prefixgate::gateway
