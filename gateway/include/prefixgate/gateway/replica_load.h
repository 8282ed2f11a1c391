// The gateway's own record of each replica's load between the engine's reports, and the
// bookkeeping around a routing decision: what a routed request adds to its replica (its blocks
// predicted in the PrefixIndex, one more request in flight, its uncached prompt tokens queued
// for prefill) and what its first token and its end take away. The load model that reads these
// counts is in routing.h (ReplicaView) and gateway/ROUTING.md.
//
// Pure functions over ReplicaView, no threads or clocks of their own: the gateway's ReplicaSet
// calls them under its lock, and prefixgate-bench's simulator calls them in virtual time, so
// both run the same bookkeeping.
//
//   RouteDecision d = policy.route(request, views, index, now);
//   gateway::record_routed(index, policy, views[d.replica], request, d, now);
//   const std::size_t uncached = gateway::uncached_prompt_tokens(request, d);
//   ...first token...   gateway::record_prefilled(index, views[d.replica], request, uncached, now);
//   ...end...           gateway::record_finished(index, policy, views[d.replica], request, d,
//                                                /*prefilled=*/true, 0, now);
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "prefixgate/gateway/prefix_index.h"
#include "prefixgate/gateway/routing.h"

namespace prefixgate::gateway {

// An engine's periodic load report (prefixgate-engine's kv_events "load" line).
struct LoadReport {
  std::size_t running = 0;
  std::size_t waiting = 0;
  std::size_t kv_pages_used = 0;
  std::size_t kv_pages_total = 0;
  std::size_t tokens_queued_for_prefill = 0;
  std::size_t preemptions_total = 0;  // since the engine started (for the dashboard)
  // The engine's speed when it announces it (0: not announced; the view keeps what it had).
  double prefill_seconds_per_token = 0;
  double decode_seconds_per_sequence = 0;
  // How long a request arriving now would wait for the engine to admit it (0: at once).
  double admission_wait_seconds = 0;
  // The engine's batch places (0: not announced) and the seconds between two running sequences
  // ending when the batch is full (0: not announced).
  std::size_t batch_slots = 0;
  double admission_interval_seconds = 0;
  // The seconds until the first running sequence ends (0: not announced).
  double next_end_seconds = 0;
};

// The prefill work a routed request adds to its replica: the prompt less the tokens the replica
// is predicted to hold. Counting the whole prompt would make a replica that holds a hot prefix
// look loaded by tokens it never prefills.
std::size_t uncached_prompt_tokens(const RouteRequest& request, const RouteDecision& decision);

// `decision` (not kNoHealthyReplica) was acted on: predicts the prompt's blocks on its replica,
// counts the request in flight on `view` (that replica's), and tells the policy (on_routed).
// Returns where the request's predictions began (PrefixIndex::predict), for the caller to keep
// in the decision's predicted_from, which record_prefilled and record_finished are given back.
std::size_t record_routed(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                          const RouteRequest& request, const RouteDecision& decision,
                          Clock::time_point now);
// The request's first token arrived: its prompt is no longer queued for prefill, and its
// predictions now expire prediction_ttl from `now` (PrefixIndex::settle): by then the engine's
// events have confirmed the blocks it computed. `view` is the request's replica's;
// `predicted_from` its decision's.
void record_prefilled(PrefixIndex& index, ReplicaView& view, const RouteRequest& request,
                      std::size_t uncached_prompt_tokens, Clock::time_point now,
                      std::size_t predicted_from = PrefixIndex::kPredictedFromUnknown);
// The request ended (completed, failed, or the client left): it is no longer in flight, and the
// policy hears of it. If its first token never came (`prefilled` false), its prompt is no longer
// queued and its predictions are settled as record_prefilled would.
void record_finished(PrefixIndex& index, RoutingPolicy& policy, ReplicaView& view,
                     const RouteRequest& request, const RouteDecision& decision, bool prefilled,
                     std::size_t uncached_prompt_tokens_if_not_prefilled, Clock::time_point now);
// A load report, received at `now`, replaces the engine-reported counts (the gateway's own
// in-flight counts stay).
void apply_load_report(ReplicaView& view, const LoadReport& report, Clock::time_point now);
// The prefill this gateway has sent to the replica that is left at `now`: its in-flight count,
// less what the replica computed of it since each was sent at prefill_seconds_per_token, in
// seconds at that rate (0 when the replica announces no speed). Inline: a routing decision reads
// it for every replica.
// Seconds from `from` to `to` by a multiplication: std::chrono::duration<double> divides by the
// clock's ticks per second, and a decision over 1,000 replicas would wait on 2,000 divisions.
inline double seconds_between(Clock::time_point from, Clock::time_point to) {
  constexpr double kSecondsPerTick =
      static_cast<double>(Clock::period::num) / static_cast<double>(Clock::period::den);
  return static_cast<double>((to - from).count()) * kSecondsPerTick;
}
inline double own_prefill_left_seconds(const ReplicaView& view, Clock::time_point now) {
  const double left = seconds_between(now, view.own_prefill_until);
  return std::min(static_cast<double>(view.inflight_prompt_tokens) * view.prefill_seconds_per_token,
                  std::max(0.0, left));
}
// The same in tokens (the in-flight count as it stands when the replica announces no speed).
double own_prefill_left_tokens(const ReplicaView& view, Clock::time_point now);

}  // namespace prefixgate::gateway
