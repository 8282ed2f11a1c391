// The load of a vLLM or SGLang replica, read from its Prometheus /metrics: the same quantities
// prefixgate-engine's load reports carry, under those engines' own names.
//
//   vLLM    vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc
//           (before 0.10: vllm:gpu_cache_usage_perc), vllm:num_preemptions_total, and the KV
//           blocks from vllm:cache_config_info{num_gpu_blocks="..."}
//   SGLang  sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage,
//           sglang:max_total_num_tokens
//
// Series of one name are summed (a data-parallel engine reports one per rank, labelled
// engine="0", ...), usage fractions averaged. Pure: text in, a report or a typed error out.
//
//   auto load = parse_engine_load(body, ReplicaKind::kVllm);
//   if (load) replicas.apply_load(r, *load);
#pragma once

#include <string_view>

#include "prefixgate/base/status.h"
#include "server/replica_set.h"

namespace prefixgate::gateway::server {

// When an engine reports its KV usage as a fraction only (no block count), the pages in the
// LoadReport are in units of 1/kUsageScale of its cache.
inline constexpr std::size_t kUsageScale = 10000;

// kInvalidValue when the running and waiting counts are not both present.
Result<LoadReport> parse_engine_load(std::string_view prometheus_text, ReplicaKind kind);

}  // namespace prefixgate::gateway::server
