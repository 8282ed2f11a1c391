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

void record_prefilled(ReplicaView& view, std::size_t uncached_prompt_tokens) {
  view.inflight_prompt_tokens -= std::min(view.inflight_prompt_tokens, uncached_prompt_tokens);
}

void record_finished(RoutingPolicy& policy, ReplicaView& view, const RouteDecision& decision,
                     std::size_t uncached_prompt_tokens_if_not_prefilled) {
  if (view.inflight_requests > 0) --view.inflight_requests;
  record_prefilled(view, uncached_prompt_tokens_if_not_prefilled);
  policy.on_finished(decision);
}

void apply_load_report(ReplicaView& view, const LoadReport& report) {
  view.running = report.running;
  view.waiting = report.waiting;
  view.kv_pages_used = report.kv_pages_used;
  view.kv_pages_total = report.kv_pages_total;
  view.tokens_queued_for_prefill = report.tokens_queued_for_prefill;
}

}  // namespace prefixgate::gateway
