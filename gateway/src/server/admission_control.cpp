// AdmissionControl: the lock around AdmissionCore, the waiters' timers, the error answers'
// wording and the admission metrics.
#include "server/admission_control.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <mutex>
#include <unordered_map>

namespace prefixgate::gateway::server {

namespace asio = serving::asio;
using namespace asio::experimental::awaitable_operators;
using Clock = AdmissionCore::Clock;
using Id = FairQueue::Id;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// A queued request's coroutine, asleep on its timer until admitted, dropped or timed out.
struct Waiter {
  explicit Waiter(asio::any_io_executor executor) : timer(std::move(executor)) {}
  asio::steady_timer timer;  // used on its connection's thread only
  enum class Outcome { kWaiting, kAdmitted, kDropped };
  Outcome outcome = Outcome::kWaiting;  // under AdmissionState::mu
};

struct TenantCounts {
  std::uint64_t admitted = 0;
  std::uint64_t rejected = 0;
};

}  // namespace

struct AdmissionState {
  explicit AdmissionState(AdmissionConfig config) : core(std::move(config)) {}

  mutable std::mutex mu;
  AdmissionCore core;                                       // under mu
  std::unordered_map<Id, std::shared_ptr<Waiter>> waiters;  // under mu
  std::map<std::string, TenantCounts> counts;               // under mu, for /stats
  Id next_id = 1;                                           // under mu
  bool closed = false;                                      // under mu

  // Set once at start-up, before any request.
  serving::CounterFamily* admitted = nullptr;      // tenant
  serving::CounterFamily* rejected = nullptr;      // tenant, reason
  serving::CounterFamily* abandoned = nullptr;     // tenant
  serving::HistogramFamily* queue_wait = nullptr;  // tenant

  // Under mu: tells each waiter its outcome and wakes it on its own thread (a timer is not
  // thread-safe). Setting the expiry in the past rather than cancelling wakes the waiter whether
  // its wait has begun or not: its coroutine may not have reached the timer yet.
  void wake(const std::vector<Id>& ids, Waiter::Outcome outcome) {
    for (Id id : ids) {
      auto it = waiters.find(id);
      if (it == waiters.end()) continue;
      it->second->outcome = outcome;
      if (closed) continue;
      std::shared_ptr<Waiter> w = it->second;
      asio::post(w->timer.get_executor(), [w] { w->timer.expires_at(Clock::time_point{}); });
    }
  }

  // Under mu: the /stats counts of `tenant`, past kMaxCountedTenants folded into "(other)" (a
  // tenant header names tenants at the client's will).
  TenantCounts& counts_for(const std::string& tenant) {
    constexpr std::size_t kMaxCountedTenants = 256;
    auto it = counts.find(tenant);
    if (it != counts.end()) return it->second;
    return counts[counts.size() < kMaxCountedTenants ? tenant : std::string("(other)")];
  }

  void finish(Id id, std::optional<std::size_t> used_tokens) {
    std::lock_guard lock(mu);
    wake(core.finish(id, used_tokens, Clock::now()), Waiter::Outcome::kAdmitted);
  }
};

AdmissionTicket::AdmissionTicket(std::shared_ptr<AdmissionState> state, Id id)
    : state_(std::move(state)), id_(id) {}

AdmissionTicket::AdmissionTicket(AdmissionTicket&& other) noexcept
    : state_(std::move(other.state_)), id_(other.id_), used_tokens_(other.used_tokens_) {}

AdmissionTicket::~AdmissionTicket() {
  if (state_) state_->finish(id_, used_tokens_);
}

namespace {

std::string tenant_label(const std::string& tenant) {
  return tenant.empty() ? "(no tenant)" : "'" + tenant + "'";
}

std::size_t retry_seconds(Clock::duration d) {
  if (d == Clock::duration::max()) return 60;  // never: a full minute's refill, then the same
  const double s = std::chrono::duration<double>(d).count();
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(s)));
}

AdmissionRefusal refusal_for(const Arrival& a, const std::string& tenant, std::size_t tokens,
                             const AdmissionConfig& config) {
  AdmissionRefusal r;
  r.limit = a.limit;
  r.retry_after_s = retry_seconds(a.retry_after);
  const std::string retry = "; retry after " + std::to_string(r.retry_after_s) + " s";
  const std::string who = "rate limit: tenant " + tenant_label(tenant);
  const std::string value = std::to_string(a.limit_value);
  switch (a.limit) {
    case Limit::kMaxConcurrent:
      r.code = "max_concurrent_exceeded";
      r.message =
          who + " already has " + value + " requests open, its max_concurrent limit" + retry;
      break;
    case Limit::kRequestsPerMinute:
      r.code = "requests_per_minute_exceeded";
      r.message = who + " is over its requests_per_minute limit (" + value + ")" + retry;
      break;
    case Limit::kTokensPerMinute:
      r.code = "tokens_per_minute_exceeded";
      r.message = who + " is over its tokens_per_minute limit (" + value +
                  "): this request is estimated at " + std::to_string(tokens) +
                  " tokens (prompt + max_tokens)";
      r.message += a.retry_after == Clock::duration::max()
                       ? ", more than the limit allows in a minute: send a smaller prompt or "
                         "max_tokens"
                       : retry;
      break;
    case Limit::kQueueFull:
      r.status = 503;
      r.code = "queue_full";
      r.message = "the gateway is overloaded: its admission queue is full (admission.max_queue " +
                  std::to_string(config.max_queue) + ")" + retry;
      break;
    case Limit::kQueueTimeout:
      r.status = 503;
      r.code = "queue_timeout";
      r.message = "the gateway is overloaded: the request waited " +
                  std::to_string(config.queue_timeout.count()) +
                  " ms for a slot without getting one (admission.queue_timeout_ms)" + retry;
      break;
    case Limit::kNone: break;
  }
  return r;
}

// Wakes when the waiter's timer expires: moved into the past (admitted or dropped), or at the
// queue timeout.
serving::Awaitable<void> sleep_on(std::shared_ptr<Waiter> w) {
  co_await w->timer.async_wait(kTuple);
}

}  // namespace

AdmissionControl::AdmissionControl(AdmissionConfig config)
    : state_(std::make_shared<AdmissionState>(std::move(config))) {}

AdmissionControl::~AdmissionControl() {
  close();
}

void AdmissionControl::close() {
  std::lock_guard lock(state_->mu);
  state_->closed = true;
}

serving::Awaitable<AdmissionResult> AdmissionControl::admit(serving::tcp::socket& client,
                                                            const std::string& tenant,
                                                            std::size_t tokens) {
  AdmissionState& s = *state_;
  AdmissionResult result;
  std::shared_ptr<Waiter> waiter;
  Id id = 0;
  asio::any_io_executor executor = co_await asio::this_coro::executor;  // the connection's thread
  const auto refuse = [&](const Arrival& a) {
    result.refusal = refusal_for(a, tenant, tokens, s.core.config());
    s.rejected->add({tenant, limit_name(a.limit)});
  };
  {
    std::lock_guard lock(s.mu);
    id = s.next_id++;
    const Arrival a = s.core.arrive(id, tenant, tokens, Clock::now());
    if (a.dropped) s.wake({*a.dropped}, Waiter::Outcome::kDropped);
    switch (a.outcome) {
      case Arrival::Outcome::kRejected:
        ++s.counts_for(tenant).rejected;
        refuse(a);
        co_return result;
      case Arrival::Outcome::kAdmitted:
        ++s.counts_for(tenant).admitted;
        s.admitted->add({tenant});
        result.ticket.emplace(state_, id);
        co_return result;
      case Arrival::Outcome::kQueued:
        waiter = std::make_shared<Waiter>(executor);
        waiter->timer.expires_after(s.core.config().queue_timeout);
        s.waiters.emplace(id, waiter);
        break;
    }
  }
  const auto queued_at = Clock::now();
  // Leaves the queue if this frame is destroyed while waiting (the server stopping).
  struct Guard {
    std::shared_ptr<AdmissionState> s;
    Id id;
    bool armed = true;
    ~Guard() {
      if (!armed) return;
      std::lock_guard lock(s->mu);
      auto it = s->waiters.find(id);
      const Waiter::Outcome outcome =
          it == s->waiters.end() ? Waiter::Outcome::kDropped : it->second->outcome;
      if (it != s->waiters.end()) s->waiters.erase(it);
      if (outcome == Waiter::Outcome::kWaiting) s->core.leave(id, Clock::now());
      if (outcome == Waiter::Outcome::kAdmitted) {
        s->wake(s->core.finish(id, 0, Clock::now()), Waiter::Outcome::kAdmitted);
      }
    }
  } guard{state_, id};
  const auto woke = co_await (sleep_on(waiter) || serving::watch_disconnect(client));
  const bool client_gone = woke.index() == 1;
  guard.armed = false;
  std::lock_guard lock(s.mu);
  s.waiters.erase(id);
  switch (waiter->outcome) {
    case Waiter::Outcome::kAdmitted:
      ++s.counts_for(tenant).admitted;
      s.admitted->add({tenant});
      s.queue_wait->observe({tenant},
                            std::chrono::duration<double>(Clock::now() - queued_at).count());
      if (client_gone) {
        s.abandoned->add({tenant});
        s.wake(s.core.finish(id, 0, Clock::now()), Waiter::Outcome::kAdmitted);
        co_return result;
      }
      result.ticket.emplace(state_, id);
      co_return result;
    case Waiter::Outcome::kDropped:
      ++s.counts_for(tenant).rejected;
      refuse(Arrival{.outcome = Arrival::Outcome::kRejected,
                     .limit = Limit::kQueueFull,
                     .retry_after = std::chrono::seconds(1)});
      co_return result;
    case Waiter::Outcome::kWaiting:
      s.core.leave(id, Clock::now());
      if (client_gone) {
        s.abandoned->add({tenant});
        co_return result;
      }
      ++s.counts_for(tenant).rejected;
      refuse(Arrival{.outcome = Arrival::Outcome::kRejected,
                     .limit = Limit::kQueueTimeout,
                     .retry_after = std::chrono::seconds(1)});
      co_return result;
  }
  co_return result;
}

void AdmissionControl::register_metrics(serving::Metrics& m) {
  using serving::MetricType;
  using serving::Sample;
  const std::string p = "prefixgate_admission_";
  AdmissionState& s = *state_;
  s.admitted =
      &m.counter(p + "admitted_total",
                 "Requests admitted by admission control (at once or after queueing).", {"tenant"});
  s.rejected = &m.counter(p + "rejected_total",
                          "Requests refused: reason is the limit (max_concurrent, "
                          "requests_per_minute, tokens_per_minute: 429; queue_full, "
                          "queue_timeout: 503).",
                          {"tenant", "reason"});
  s.abandoned =
      &m.counter(p + "abandoned_total",
                 "Requests whose client closed the connection while they were queued.", {"tenant"});
  s.queue_wait = &m.histogram(
      p + "queue_wait_seconds", "Time queued requests waited for a slot before being admitted.",
      {"tenant"}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  std::shared_ptr<AdmissionState> state = state_;
  const auto per_tenant = [state](auto read) {
    return [state, read] {
      std::lock_guard lock(state->mu);
      std::vector<Sample> out;
      for (const auto& [tenant, t] : state->core.tenants()) {
        out.push_back({{tenant}, static_cast<double>(read(t))});
      }
      return out;
    };
  };
  m.callback(p + "inflight", "Admitted requests not yet finished, per tenant.", MetricType::kGauge,
             {"tenant"},
             per_tenant([](const AdmissionCore::TenantState& t) { return t.inflight; }));
  m.callback(p + "queued", "Requests waiting for a gateway-wide slot, per tenant.",
             MetricType::kGauge, {"tenant"},
             per_tenant([](const AdmissionCore::TenantState& t) { return t.queued; }));
  m.callback(p + "bound", "admission.max_inflight and admission.max_queue (0: no bound).",
             MetricType::kGauge, {"bound"}, [state] {
               const AdmissionConfig& c = state->core.config();
               return std::vector<Sample>{
                   {{"max_inflight"}, static_cast<double>(c.max_inflight)},
                   {{"max_queue"}, static_cast<double>(c.max_inflight > 0 ? c.max_queue : 0)}};
             });
  m.callback(
      "prefixgate_tenant_limit",
      "Configured tenant_limits (tenant \"default\": tenants without an entry); limits left "
      "out are not shown.",
      MetricType::kGauge, {"tenant", "limit"}, [state] {
        std::vector<Sample> out;
        for (const auto& [tenant, l] : state->core.config().tenant_limits) {
          for (const auto& [name, v] : {std::pair{"requests_per_minute", l.requests_per_minute},
                                        {"tokens_per_minute", l.tokens_per_minute},
                                        {"max_concurrent", l.max_concurrent}}) {
            if (v > 0) out.push_back({{tenant, name}, static_cast<double>(v)});
          }
        }
        return out;
      });
}

std::string AdmissionControl::stats_json() const {
  const AdmissionState& s = *state_;
  std::lock_guard lock(s.mu);
  const AdmissionConfig& c = s.core.config();
  const auto limit = [](std::size_t v) {
    return v > 0 ? json::Value(static_cast<double>(v)) : json::Value();
  };
  // Configured tenants first (default among them), then any other tenant with counts.
  std::vector<std::string> names;
  for (const auto& [name, l] : c.tenant_limits) names.push_back(name);
  for (const auto& [name, n] : s.counts) {
    if (!c.tenant_limits.contains(name)) names.push_back(name);
  }
  json::Array tenants;
  for (const std::string& name : names) {
    const TenantLimits& l = s.core.limits_for(name);
    auto t = s.core.tenants().find(name);
    auto n = s.counts.find(name);
    tenants.push_back(json::Object{
        {"tenant", name},
        {"requests_per_minute", limit(l.requests_per_minute)},
        {"tokens_per_minute", limit(l.tokens_per_minute)},
        {"max_concurrent", limit(l.max_concurrent)},
        {"inflight", static_cast<double>(t == s.core.tenants().end() ? 0 : t->second.inflight)},
        {"queued", static_cast<double>(t == s.core.tenants().end() ? 0 : t->second.queued)},
        {"admitted", static_cast<double>(n == s.counts.end() ? 0 : n->second.admitted)},
        {"rejected", static_cast<double>(n == s.counts.end() ? 0 : n->second.rejected)}});
  }
  return json::to_json(
      json::Object{{"max_inflight", static_cast<double>(c.max_inflight)},
                   {"max_queue", static_cast<double>(c.max_queue)},
                   {"queue_timeout_ms", static_cast<double>(c.queue_timeout.count())},
                   {"inflight", static_cast<double>(s.core.inflight())},
                   {"queued", static_cast<double>(s.core.queued())},
                   {"tenants", std::move(tenants)}});
}

std::size_t completion_estimate(const json::Value& chat_body, std::size_t default_max_tokens) {
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    const json::Value* v = chat_body.find(key);
    if (v != nullptr && v->is_number() && v->as_number().value >= 0) {
      return static_cast<std::size_t>(v->as_number().value);
    }
  }
  return default_max_tokens;
}

}  // namespace prefixgate::gateway::server
