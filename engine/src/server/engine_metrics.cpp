// The engine's /metrics catalogue. Gauges and counters kept by the engine thread are read from
// EngineStats at scrape time; latencies are observed by the HTTP layer.
#include "server/http_common.h"

namespace prefixgate::engine::server {

void register_engine_metrics(ServerContext& ctx) {
  serving::Metrics& m = *ctx.metrics;
  EngineLoop* e = ctx.engine;
  using serving::MetricType;
  const auto stat = [e](auto read) {
    return [e, read] { return static_cast<double>(read(e->stats())); };
  };
  const std::string p = "prefixgate_engine_";
  m.callback(p + "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
             MetricType::kCounter,
             stat([](const EngineStats& s) { return s.scheduler.prompt_tokens_total; }));
  m.callback(p + "prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
             MetricType::kCounter,
             stat([](const EngineStats& s) { return s.scheduler.cached_prompt_tokens_total; }));
  m.callback(p + "kv_pages_used", "KV pages in use (sequences and cache).", MetricType::kGauge,
             stat([](const EngineStats& s) { return s.kv_pages_used; }));
  m.callback(p + "kv_pages_total", "KV pages in the pool.", MetricType::kGauge,
             stat([](const EngineStats& s) { return s.kv_pages_total; }));
  m.callback(p + "kv_cache_usage_ratio", "Fraction of KV pages in use.", MetricType::kGauge,
             stat([](const EngineStats& s) {
               return s.kv_pages_total == 0 ? 0.0
                                            : static_cast<double>(s.kv_pages_used) /
                                                  static_cast<double>(s.kv_pages_total);
             }));
  m.callback(p + "kv_pages_cached", "KV pages held by the prefix cache.", MetricType::kGauge,
             stat([](const EngineStats& s) { return s.kv_pages_cached; }));
  m.callback(p + "num_requests_running", "Sequences running.", MetricType::kGauge,
             stat([](const EngineStats& s) { return s.scheduler.running; }));
  m.callback(p + "num_requests_waiting", "Sequences waiting for admission.", MetricType::kGauge,
             stat([](const EngineStats& s) { return s.scheduler.waiting; }));
  m.callback(p + "num_preemptions_total", "Sequences preempted (recompute).", MetricType::kCounter,
             stat([](const EngineStats& s) { return s.scheduler.preemptions_total; }));
  m.callback(p + "shared_prefill_waits_total",
             "Requests that waited for a prefill under way to compute their prefix.",
             MetricType::kCounter,
             stat([](const EngineStats& s) { return s.scheduler.shared_prefill_waits_total; }));
  m.callback(p + "prompt_tokens_total", "Prompt tokens of admitted requests.", MetricType::kCounter,
             stat([](const EngineStats& s) { return s.scheduler.prompt_tokens_total; }));
  m.callback(p + "generation_tokens_total", "Tokens generated.", MetricType::kCounter,
             stat([](const EngineStats& s) { return s.generated_tokens_total; }));
  // The same quantities under vLLM's names, for routers and dashboards built for vLLM (the
  // gateway's kind: vllm reads the first three for its load model).
  const std::string served = ctx.model.name;
  const auto vllm = [&](const char* name, const char* help, MetricType type, auto read) {
    m.callback(name, help, type, {"model_name"}, [e, read, served] {
      return std::vector<serving::Sample>{{{served}, static_cast<double>(read(e->stats()))}};
    });
  };
  vllm("vllm:num_requests_running", "Number of requests in model execution batches.",
       MetricType::kGauge, [](const EngineStats& s) { return s.scheduler.running; });
  vllm("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
       MetricType::kGauge, [](const EngineStats& s) { return s.scheduler.waiting; });
  vllm("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", MetricType::kGauge,
       [](const EngineStats& s) {
         return s.kv_pages_total == 0
                    ? 0.0
                    : static_cast<double>(s.kv_pages_used) / static_cast<double>(s.kv_pages_total);
       });
  vllm("vllm:num_preemptions_total", "Cumulative number of preemptions.", MetricType::kCounter,
       [](const EngineStats& s) { return s.scheduler.preemptions_total; });
  vllm("vllm:prefix_cache_queries_total", "Prefix cache queries, in tokens.", MetricType::kCounter,
       [](const EngineStats& s) { return s.scheduler.prompt_tokens_total; });
  vllm("vllm:prefix_cache_hits_total", "Prefix cache hits, in tokens.", MetricType::kCounter,
       [](const EngineStats& s) { return s.scheduler.cached_prompt_tokens_total; });
  vllm("vllm:prompt_tokens_total", "Number of prefill tokens processed.", MetricType::kCounter,
       [](const EngineStats& s) { return s.scheduler.prompt_tokens_total; });
  vllm("vllm:generation_tokens_total", "Number of generation tokens processed.",
       MetricType::kCounter, [](const EngineStats& s) { return s.generated_tokens_total; });
  const std::string block_size = std::to_string(e->config().page_tokens);
  const std::string blocks = std::to_string(e->config().num_pages);
  m.callback("vllm:cache_config_info", "Information of the LLMEngine CacheConfig.",
             MetricType::kGauge, {"block_size", "num_gpu_blocks", "model_name"},
             [block_size, blocks, served] {
               return std::vector<serving::Sample>{{{block_size, blocks, served}, 1.0}};
             });
  ctx.observed.requests_total = &m.counter(p + "requests_total", "Generation requests.");
  ctx.observed.request_errors_total =
      &m.counter(p + "request_errors_total", "Requests answered with an error status.");
  ctx.observed.ttft_seconds =
      &m.histogram(p + "time_to_first_token_seconds", "Time to first token.",
                   serving::latency_buckets_seconds());
  ctx.observed.inter_token_seconds =
      &m.histogram(p + "inter_token_latency_seconds", "Time between generated tokens.",
                   serving::latency_buckets_seconds());
  ctx.observed.e2e_seconds =
      &m.histogram(p + "e2e_request_latency_seconds", "Request latency, arrival to last token.",
                   serving::latency_buckets_seconds());
}

}  // namespace prefixgate::engine::server
