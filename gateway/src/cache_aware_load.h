// cache_aware's load model: how long a request sent to a replica now would wait there, in
// seconds, from its load report and what this gateway has sent it since (gateway/ROUTING.md,
// "Load model", "A queue that drains"). Kept apart from the rules that use it
// (routing_cache_aware.cpp); inline, as every decision reads it for every replica.
#pragma once

#include <algorithm>
#include <span>

#include "prefixgate/gateway/replica_load.h"
#include "prefixgate/gateway/routing.h"
#include "routing_common.h"

namespace prefixgate::gateway::routing {

class CacheAwareLoad {
 public:
  // `config` must outlive the model (the policy holds both).
  explicit CacheAwareLoad(const CacheAwareConfig& config) : config_(config) {}
  // The decision's time: the queues drain up to it.
  void set_now(Clock::time_point now) { now_ = now; }

  // Whether every healthy replica says how fast it is (the cost can be in seconds).
  static bool timed(std::span<const ReplicaView> replicas) {
    bool any = false;
    for (const ReplicaView& v : replicas) {
      if (!v.healthy) continue;
      if (!(v.prefill_seconds_per_token > 0) || !(v.decode_seconds_per_sequence > 0)) return false;
      any = true;
    }
    return any;
  }

  // The load model in seconds: the wait for a place in the batch (a full replica admits a
  // newcomer only as running sequences end, which its queue of short prefills does not show),
  // queued prefill at the replica's rate, plus a step's share of each sequence it runs.
  // `queued`: queued_prefill_seconds(v), kept for the rules after the cost (idle_replica).
  double load_seconds(const ReplicaView& v, bool with_admission, double& queued) const {
    const double admission = admission_seconds(v);  // once: queued_prefill_seconds reads it too
    queued = queued_prefill_seconds(v, admission);
    return (with_admission ? admission : 0.0) + queued +
           decode_sequences(v) * v.decode_seconds_per_sequence;
  }

  // The prefill queued on a replica at the decision's time, in seconds at its prefill rate. With
  // prefill_drain, one gateway and a place in the replica's batch (`admission`: its wait for
  // one): this gateway's prefill left there, plus what the last report showed beyond it less
  // what the replica computed since the report arrived. Otherwise the larger of the report's and
  // the gateway's counts. In seconds, without a division: every decision reads it for every
  // replica.
  double queued_prefill_seconds(const ReplicaView& v, double admission) const {
    const double rate = v.prefill_seconds_per_token;
    const bool place = v.batch_slots > 0 && admission == 0;  // has_place(v), its wait known
    if (!config_.prefill_drain || config_.gateways > 1 || !(rate > 0) || !place) {
      return queued_prefill_tokens(v) * rate;
    }
    const double since_report = seconds_between(v.report_at, now_);
    const double others =
        std::max(0.0, static_cast<double>(v.report_beyond_own_tokens) * rate - since_report);
    return own_prefill_left_seconds(v, now_) + others;
  }

  // The same in tokens, for the rules that count tokens.
  double queued_prefill(const ReplicaView& v) const {
    const double rate = v.prefill_seconds_per_token;
    if (!(rate > 0)) return queued_prefill_tokens(v);
    return queued_prefill_seconds(v, admission_seconds(v)) / rate;
  }

  // Whether the replica says its batch has a place for a newcomer: it announces its batch places
  // and reports no wait for one. An upstream that announces nothing (vLLM, SGLang, OpenAI) cannot
  // be told apart from a full one, so it is not taken as having a place.
  bool has_place(const ReplicaView& v) const {
    return v.batch_slots > 0 && admission_seconds(v) == 0;
  }

  // The wait for a place in the batch: the report's, plus one admission interval for each request
  // this gateway sent since that is past the batch's places (the report cannot know of them; a
  // burst sent between two reports would otherwise all go to the replica that looked free).
  double admission_seconds(const ReplicaView& v) const {
    if (v.batch_slots == 0 || !(v.admission_interval_seconds > 0)) return v.admission_wait_seconds;
    const bool cohort_wait = config_.cohort_wait;
    const std::size_t reported = v.running + v.waiting;
    const std::size_t sent_since =
        v.inflight_requests > reported ? v.inflight_requests - reported : 0;
    const std::size_t ahead = reported + sent_since + 1;  // the newcomer's place
    if (ahead <= v.batch_slots) return v.admission_wait_seconds;
    const std::size_t past = std::min(sent_since + 1, ahead - v.batch_slots);
    double wait = static_cast<double>(past) * v.admission_interval_seconds;
    // The report had a place that the requests sent since took: the first one past it waits
    // for the first running sequence to end. next_end_wait: for as long as the report says that
    // is (next_end_seconds), where it says it, instead of one interval (the steady state's mean:
    // the next end may be much nearer, or, in a batch filled in a burst, a whole lifetime away).
    // cohort_wait: at least one interval.
    if (v.admission_wait_seconds == 0 && v.next_end_seconds > 0) {
      if (cohort_wait) {
        wait += std::max(0.0, v.next_end_seconds - v.admission_interval_seconds);
      } else if (config_.next_end_wait) {
        wait += v.next_end_seconds - v.admission_interval_seconds;
      }
    }
    return v.admission_wait_seconds + wait;
  }

 private:
  const CacheAwareConfig& config_;
  Clock::time_point now_{};
};

}  // namespace prefixgate::gateway::routing
