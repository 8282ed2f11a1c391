// The gateway's /metrics catalogue: the families the proxy records on its request path, and
// the per-replica gauges read from the replica set at each scrape.
#pragma once

#include "prefixgate/canonicalize/segment_cache.h"
#include "prefixgate/serving/metrics.h"

namespace prefixgate::gateway::server {

class ReplicaSet;

struct ProxyMetrics {
  serving::CounterFamily* requests = nullptr;                 // route, status, replica, tenant
  serving::HistogramFamily* ttft = nullptr;                   // replica
  serving::HistogramFamily* ttft_by_cache = nullptr;          // cache (hit|miss), streamed
  serving::HistogramFamily* e2e = nullptr;                    // route
  serving::HistogramFamily* overhead = nullptr;               // route
  serving::CounterFamily* prompt_tokens = nullptr;            // replica, tenant
  serving::CounterFamily* cached_tokens = nullptr;            // replica, tenant
  serving::CounterFamily* predicted_cached_tokens = nullptr;  // replica
  serving::Histogram* prediction_error = nullptr;             // |actual - predicted| tokens
  serving::CounterFamily* decisions = nullptr;                // policy, reason
  serving::CounterFamily* retries = nullptr;                  // reason
  serving::CounterFamily* upstream_failures = nullptr;        // replica, kind
  serving::CounterFamily* canonicalization = nullptr;         // rule, mode
  serving::CounterFamily* findings = nullptr;                 // rule
  serving::CounterFamily* kv_events = nullptr;                // replica, type
  serving::CounterFamily* kv_event_gaps = nullptr;            // replica, outcome
  serving::CounterFamily* kv_event_replays = nullptr;         // replica
  serving::CounterFamily* kv_event_resets = nullptr;          // replica
  serving::CounterFamily* kv_event_skipped = nullptr;         // replica, reason
  serving::CounterFamily* load_scrape_failures = nullptr;     // replica
  serving::CounterFamily* template_errors = nullptr;          // model, action
};

// Registers every family in `metrics` (in the order /metrics shows them) and returns the ones
// the proxy records into. `replicas` must outlive `metrics`.
ProxyMetrics register_proxy_metrics(serving::Metrics& metrics, const ReplicaSet& replicas);
// prefixgate_tokenizer_cache_*: hits, misses, bytes of text each way, evictions, memory held.
void register_segment_cache_metrics(serving::Metrics& metrics, const canon::SegmentCache& cache);

}  // namespace prefixgate::gateway::server
