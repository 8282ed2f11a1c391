// The gateway's /metrics catalogue: the families the proxy records on its request path, and
// the per-replica gauges read from the replica set at each scrape.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "prefixgate/canonicalize/segment_cache.h"
#include "prefixgate/serving/metrics.h"

namespace prefixgate::gateway::server {

class ReplicaSet;
struct ProxyMetrics;

// The series a proxied request adds to in the families labelled by its route, replica and
// tenant, found once for the request (ProxyMetrics::request_series, the calling thread's cache:
// one lookup of three labels) where each of six families' own lookups hashed and compared the
// same labels again. Each series is resolved at its first use, so a family shows a
// series only once something was added to it, as it would without this.
class RequestSeries {
 public:
  // `m`'s families, as registered (it keeps pointers to them, not to `m`).
  RequestSeries(const ProxyMetrics& m, const serving::LabelValues& route_replica_tenant);
  serving::Counter& prompt_tokens() const;            // replica, tenant
  serving::Counter& cached_tokens() const;            // replica, tenant
  serving::Counter& predicted_cached_tokens() const;  // replica
  serving::Counter& requests(int status) const;       // route, status, replica, tenant
  serving::Histogram& e2e() const;                    // route
  serving::Histogram& overhead() const;               // route

 private:
  serving::CounterFamily* requests_family_;
  serving::CounterFamily* prompt_tokens_family_;
  serving::CounterFamily* cached_tokens_family_;
  serving::CounterFamily* predicted_family_;
  serving::HistogramFamily* e2e_family_;
  serving::HistogramFamily* overhead_family_;
  std::string route_, replica_, tenant_;
  // Set at first use by any thread (the same address whichever sets it).
  mutable std::atomic<serving::Counter*> prompt_tokens_{nullptr}, cached_tokens_{nullptr},
      predicted_cached_tokens_{nullptr}, requests_ok_{nullptr};
  mutable std::atomic<serving::Histogram*> e2e_{nullptr}, overhead_{nullptr};
};
using RequestSeriesTable = serving::LabelledTable<RequestSeries>;

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
  // A request's series of the families above by route, replica and tenant, in that order:
  // request_series->at({route, replica, tenant}).
  std::shared_ptr<RequestSeriesTable> request_series;
};

// Registers every family in `metrics` (in the order /metrics shows them) and returns the ones
// the proxy records into. `replicas` must outlive `metrics`.
ProxyMetrics register_proxy_metrics(serving::Metrics& metrics, const ReplicaSet& replicas);
// prefixgate_tokenizer_cache_*: hits, misses, bytes of text each way, evictions, memory held.
void register_segment_cache_metrics(serving::Metrics& metrics, const canon::SegmentCache& cache);

}  // namespace prefixgate::gateway::server
