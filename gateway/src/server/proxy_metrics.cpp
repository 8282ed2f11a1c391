#include "server/proxy_metrics.h"

#include "server/replica_set.h"

namespace prefixgate::gateway::server {

ProxyMetrics register_proxy_metrics(serving::Metrics& m, const ReplicaSet& replicas) {
  using serving::latency_buckets_seconds;
  using serving::MetricType;
  using serving::Sample;
  const std::string p = "prefixgate_";
  ProxyMetrics out;
  out.requests = &m.counter(p + "requests_total", "Requests answered, by route and status.",
                            {"route", "status", "replica", "tenant"});
  out.ttft = &m.histogram(p + "time_to_first_token_seconds", "Arrival to the first streamed event.",
                          {"replica"}, latency_buckets_seconds());
  out.ttft_by_cache = &m.histogram(
      p + "time_to_first_token_by_cache_seconds",
      "Arrival to the first streamed event, by whether the engine served at least half the "
      "prompt from cache (hit) or not (miss).",
      {"cache"}, latency_buckets_seconds());
  out.e2e = &m.histogram(p + "request_duration_seconds", "Arrival to the last byte.", {"route"},
                         latency_buckets_seconds());
  out.overhead = &m.histogram(p + "gateway_overhead_seconds",
                              "Time the gateway itself added before forwarding.", {"route"},
                              latency_buckets_seconds());
  out.prompt_tokens = &m.counter(p + "prompt_tokens_total", "Prompt tokens (engine-reported).",
                                 {"replica", "tenant"});
  out.cached_tokens =
      &m.counter(p + "cached_tokens_total",
                 "Prompt tokens served from the replica's prefix cache (engine-reported).",
                 {"replica", "tenant"});
  out.predicted_cached_tokens = &m.counter(p + "predicted_cached_tokens_total",
                                           "Cached tokens the router predicted.", {"replica"});
  out.prediction_error =
      &m.histogram(p + "cached_tokens_prediction_error_tokens",
                   "|engine-reported - predicted| cached tokens.", serving::token_buckets());
  out.decisions = &m.counter(p + "routing_decisions_total", "Routing decisions by reason.",
                             {"policy", "reason"});
  out.retries = &m.counter(p + "retries_total", "Requests retried on another replica.", {"reason"});
  out.upstream_failures = &m.counter(p + "upstream_failures_total",
                                     "Failed exchanges with a replica.", {"replica", "kind"});
  out.canonicalization = &m.counter(
      p + "canonicalization_changes_total",
      "Canonicalization changes, by rule and mode (observe: counted only).", {"rule", "mode"});
  out.findings = &m.counter(p + "prompt_findings_total",
                            "Volatile content found in prompts, by lint rule.", {"rule"});
  out.kv_events =
      &m.counter(p + "kv_events_total", "kv_events lines applied.", {"replica", "type"});
  out.template_errors = &m.counter(
      p + "template_errors_total",
      "Requests a model's chat template refused, by model and action (reject: answered 400; "
      "route_on_text: routed on the request's text).",
      {"model", "action"});

  const ReplicaSet* rs = &replicas;
  const auto per_replica = [rs](auto read) {
    return [rs, read] {
      std::vector<Sample> samples;
      for (const ReplicaStatus& s : rs->status()) {
        samples.push_back({{s.name}, static_cast<double>(read(s))});
      }
      return samples;
    };
  };
  const auto gauge = [&](const char* name, const char* help, auto read) {
    m.callback(p + name, help, MetricType::kGauge, {"replica"}, per_replica(read));
  };
  gauge("upstream_healthy", "1 when the replica is admitted.",
        [](const ReplicaStatus& s) { return s.view.healthy ? 1.0 : 0.0; });
  gauge("upstream_inflight_requests", "Requests in flight per replica.",
        [](const ReplicaStatus& s) { return s.view.inflight_requests; });
  gauge("upstream_tokens_queued_for_prefill", "From the replica's load reports.",
        [](const ReplicaStatus& s) { return s.view.tokens_queued_for_prefill; });
  gauge("upstream_running_sequences", "From the replica's load reports.",
        [](const ReplicaStatus& s) { return s.view.running; });
  gauge("upstream_waiting_sequences", "From the replica's load reports.",
        [](const ReplicaStatus& s) { return s.view.waiting; });
  gauge("upstream_kv_usage_ratio",
        "KV pages in use over KV pages, from the replica's load reports.",
        [](const ReplicaStatus& s) {
          return s.view.kv_pages_total == 0 ? 0.0
                                            : static_cast<double>(s.view.kv_pages_used) /
                                                  static_cast<double>(s.view.kv_pages_total);
        });
  gauge("upstream_preemptions",
        "Sequences the replica has preempted since it started (its load reports).",
        [](const ReplicaStatus& s) { return s.preemptions_total; });
  gauge("index_blocks", "Blocks the prefix index holds per replica.",
        [](const ReplicaStatus& s) { return s.index_blocks; });
  gauge("kv_events_age_seconds", "Seconds since the replica's last kv_events line.",
        [](const ReplicaStatus& s) { return s.seconds_since_event; });
  m.callback(p + "index_size_hashes", "Distinct block hashes in the prefix index.",
             MetricType::kGauge, [rs] { return static_cast<double>(rs->index_size()); });
  return out;
}

}  // namespace prefixgate::gateway::server
