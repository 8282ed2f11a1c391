#include "server/proxy_metrics.h"

#include "server/replica_set.h"

namespace prefixgate::gateway::server {
namespace {

// The series in `slot`, looked up in the family at its first use.
template <class Series, class Lookup>
Series& resolved(std::atomic<Series*>& slot, Lookup&& lookup) {
  Series* series = slot.load(std::memory_order_acquire);
  if (series == nullptr) {
    series = &lookup();
    slot.store(series, std::memory_order_release);
  }
  return *series;
}

}  // namespace

RequestSeries::RequestSeries(const ProxyMetrics& m, const serving::LabelValues& labels)
    : requests_family_(m.requests),
      prompt_tokens_family_(m.prompt_tokens),
      cached_tokens_family_(m.cached_tokens),
      predicted_family_(m.predicted_cached_tokens),
      e2e_family_(m.e2e),
      overhead_family_(m.overhead),
      route_(labels.at(0)),
      replica_(labels.at(1)),
      tenant_(labels.at(2)) {}

serving::Counter& RequestSeries::prompt_tokens() const {
  return resolved(
      prompt_tokens_, [&]() -> auto& {
        return prompt_tokens_family_->series(serving::LabelValues{replica_, tenant_});
      });
}

serving::Counter& RequestSeries::cached_tokens() const {
  return resolved(
      cached_tokens_, [&]() -> auto& {
        return cached_tokens_family_->series(serving::LabelValues{replica_, tenant_});
      });
}

serving::Counter& RequestSeries::predicted_cached_tokens() const {
  return resolved(
      predicted_cached_tokens_, [&]() -> auto& {
        return predicted_family_->series(serving::LabelValues{replica_});
      });
}

serving::Counter& RequestSeries::requests(int status) const {
  const auto lookup = [&]() -> auto& {
    return requests_family_->series(
        serving::LabelValues{route_, std::to_string(status), replica_, tenant_});
  };
  // The answers' usual status kept; any other looked up (still cached by the family).
  if (status == 200) return resolved(requests_ok_, lookup);
  return requests_family_->series({route_, std::to_string(status), replica_, tenant_});
}

serving::Histogram& RequestSeries::e2e() const {
  return resolved(
      e2e_, [&]() -> auto& { return e2e_family_->series(serving::LabelValues{route_}); });
}

serving::Histogram& RequestSeries::overhead() const {
  return resolved(
      overhead_, [&]() -> auto& { return overhead_family_->series(serving::LabelValues{route_}); });
}

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
  out.kv_events = &m.counter(p + "kv_events_total",
                             "Cache events applied (stored, removed, cleared; snapshot, load).",
                             {"replica", "type"});
  out.kv_event_gaps = &m.counter(
      p + "kv_events_gaps_total",
      "Missed KV-event batches: filled from the replay socket (replayed) or not (lost: the "
      "replica's cached blocks count as unknown until stored again).",
      {"replica", "outcome"});
  out.kv_event_replays =
      &m.counter(p + "kv_events_replays_total",
                 "Replay requests sent to a replica's replay socket.", {"replica"});
  out.kv_event_resets = &m.counter(
      p + "kv_events_resets_total",
      "Engine restarts seen (sequence numbers began again): its blocks forgotten.", {"replica"});
  out.kv_event_skipped = &m.counter(
      p + "kv_events_skipped_total",
      "KV-event input skipped, by reason: malformed_frame, malformed_payload, unknown_event, "
      "unknown_parent (a chain never seen), lora, other_group, bad_tokens (blocks).",
      {"replica", "reason"});
  out.load_scrape_failures = &m.counter(
      p + "upstream_load_scrape_failures_total",
      "vllm and sglang upstreams: /metrics reads that failed or had no load.", {"replica"});
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
  gauge("kv_events_age_seconds", "Seconds since the replica's last cache event.",
        [](const ReplicaStatus& s) { return s.seconds_since_event; });
  m.callback(p + "kv_events_connected",
             "1 while the replica's cache events are received, 0 while they cannot be (routing "
             "then uses the gateway's predictions for it). openai upstreams have none.",
             MetricType::kGauge, {"replica", "kind"}, [rs] {
               std::vector<Sample> samples;
               for (const ReplicaStatus& s : rs->status()) {
                 if (s.events == EventsLink::kNone) continue;
                 samples.push_back({{s.name, replica_kind_name(s.kind)},
                                    s.events == EventsLink::kUp ? 1.0 : 0.0});
               }
               return samples;
             });
  m.callback(p + "index_size_hashes", "Distinct block hashes in the prefix index.",
             MetricType::kGauge, [rs] { return static_cast<double>(rs->index_size()); });
  out.request_series =
      std::make_shared<RequestSeriesTable>([families = out](const serving::LabelValues& labels) {
        return std::make_unique<RequestSeries>(families, labels);
      });
  return out;
}

void register_segment_cache_metrics(serving::Metrics& m, const canon::SegmentCache& cache) {
  using serving::MetricType;
  const std::string p = "prefixgate_tokenizer_cache_";
  const canon::SegmentCache* c = &cache;
  const auto read = [&](const char* name, const char* help, MetricType type, auto field) {
    m.callback(p + name, help, type, [c, field] { return static_cast<double>(field(c->stats())); });
  };
  using S = canon::SegmentCacheStats;
  read("hits_total", "Prompt segments (text between special tokens) whose tokens came from cache.",
       MetricType::kCounter, [](const S& s) { return s.hits; });
  read("misses_total", "Prompt segments tokenized (and then cached).", MetricType::kCounter,
       [](const S& s) { return s.misses; });
  read("hit_bytes_total", "Prompt bytes whose tokens came from cache.", MetricType::kCounter,
       [](const S& s) { return s.hit_bytes; });
  read("miss_bytes_total", "Prompt bytes tokenized in cacheable segments.", MetricType::kCounter,
       [](const S& s) { return s.miss_bytes; });
  read("evictions_total", "Segments evicted, least recently used first.", MetricType::kCounter,
       [](const S& s) { return s.evictions; });
  read("bytes", "Memory held by cached segments (tokens, offsets, index).", MetricType::kGauge,
       [](const S& s) { return s.bytes; });
  read("entries", "Segments held.", MetricType::kGauge, [](const S& s) { return s.entries; });
}

}  // namespace prefixgate::gateway::server
