#include "prefixgate/gateway/replica_load.h"

#include <algorithm>
#include <chrono>

namespace prefixgate::gateway {

namespace {

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

double own_prefill_left_tokens(const ReplicaView& view, Clock::time_point now) {
  if (!(view.prefill_seconds_per_token > 0))
    return static_cast<double>(view.inflight_prompt_tokens);
  return own_prefill_left_seconds(view, now) / view.prefill_seconds_per_token;
}

std::size_t uncached_prompt_tokens(const RouteRequest& request, const RouteDecision& decision) {
  return request.prompt_tokens - std::min(request.prompt_tokens, decision.predicted_cached_tokens);
}

std::size_t record_routed(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                          const RouteRequest& request, const RouteDecision& decision,
                          Clock::time_point now) {
  const std::size_t predicted_from = index.predict(decision.replica, request.block_hashes, now);
  ++view.inflight_requests;
  const std::size_t uncached = uncached_prompt_tokens(request, decision);
  view.inflight_prompt_tokens += uncached;
  // The replica computes it after what this gateway sent before it.
  if (view.prefill_seconds_per_token > 0) {
    view.own_prefill_until =
        std::max(view.own_prefill_until, now) +
        seconds(static_cast<double>(uncached) * view.prefill_seconds_per_token);
  }
  policy.on_routed(request, decision, now);
  return predicted_from;
}

void record_prefilled(PrefixIndex& index, ReplicaView& view, const RouteRequest& request,
                      std::size_t uncached_prompt_tokens, Clock::time_point now,
                      std::size_t predicted_from) {
  view.inflight_prompt_tokens -= std::min(view.inflight_prompt_tokens, uncached_prompt_tokens);
  // Done sooner than predicted: none of this gateway's prefill is left there.
  if (view.inflight_prompt_tokens == 0) {
    view.own_prefill_until = std::min(view.own_prefill_until, now);
  }
  index.settle(view.id, request.block_hashes, now, predicted_from);
}

void record_finished(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                     const RouteRequest& request, const RouteDecision& decision, bool prefilled,
                     std::size_t uncached_prompt_tokens_if_not_prefilled, Clock::time_point now) {
  if (view.inflight_requests > 0) --view.inflight_requests;
  if (!prefilled) {
    record_prefilled(index, view, request, uncached_prompt_tokens_if_not_prefilled, now,
                     decision.predicted_from);
  }
  policy.on_finished(decision);
}

void apply_load_report(ReplicaView& view, const LoadReport& report, Clock::time_point now) {
  view.report_at = now;
  const double own = own_prefill_left_tokens(view, now);
  const auto reported = static_cast<double>(report.tokens_queued_for_prefill);
  view.report_beyond_own_tokens = reported > own ? static_cast<std::size_t>(reported - own) : 0;
  view.running = report.running;
  view.waiting = report.waiting;
  view.kv_pages_used = report.kv_pages_used;
  view.kv_pages_total = report.kv_pages_total;
  view.tokens_queued_for_prefill = report.tokens_queued_for_prefill;
  view.admission_wait_seconds = report.admission_wait_seconds;
  view.batch_slots = report.batch_slots;
  view.admission_interval_seconds = report.admission_interval_seconds;
  view.next_end_seconds = report.next_end_seconds;
  if (report.prefill_seconds_per_token > 0 && report.decode_seconds_per_sequence > 0) {
    view.prefill_seconds_per_token = report.prefill_seconds_per_token;
    view.decode_seconds_per_sequence = report.decode_seconds_per_sequence;
  }
}

}  // namespace prefixgate::gateway
