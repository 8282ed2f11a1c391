#include "prefixgate/gateway/replica_load.h"

#include <algorithm>

namespace prefixgate::gateway {

std::size_t uncached_prompt_tokens(const RouteRequest& request, const RouteDecision& decision) {
  return request.prompt_tokens - std::min(request.prompt_tokens, decision.predicted_cached_tokens);
}

void record_routed(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                   const RouteRequest& request, const RouteDecision& decision,
                   Clock::time_point now) {
  index.predict(decision.replica, request.block_hashes, now);
  ++view.inflight_requests;
  view.inflight_prompt_tokens += uncached_prompt_tokens(request, decision);
  policy.on_routed(request, decision, now);
}

void record_prefilled(PrefixIndex& index, ReplicaView& view, const RouteRequest& request,
                      std::size_t uncached_prompt_tokens, Clock::time_point now) {
  view.inflight_prompt_tokens -= std::min(view.inflight_prompt_tokens, uncached_prompt_tokens);
  index.settle(view.id, request.block_hashes, now);
}

void record_finished(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                     const RouteRequest& request, const RouteDecision& decision, bool prefilled,
                     std::size_t uncached_prompt_tokens_if_not_prefilled, Clock::time_point now) {
  if (view.inflight_requests > 0) --view.inflight_requests;
  if (!prefilled) {
    record_prefilled(index, view, request, uncached_prompt_tokens_if_not_prefilled, now);
  }
  policy.on_finished(decision);
}

void apply_load_report(ReplicaView& view, const LoadReport& report) {
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
