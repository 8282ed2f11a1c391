// parse_engine_load on /metrics pages as vLLM and SGLang write them.
#include "server/engine_load.h"

#include <gtest/gtest.h>

namespace prefixgate::gateway::server {
namespace {

TEST(EngineLoadTest, ReadsVllmSummingItsDataParallelEngines) {
  const std::string page =
      R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B"} 4.0
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B"} 2.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B"} 0.25
vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B"} 7.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="1000",prefix_caching_hash_algo="sha256"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",num_gpu_blocks="1000",prefix_caching_hash_algo="sha256"} 1.0
vllm:num_requests_running_created 1.7e9
)";
  auto load = parse_engine_load(page, ReplicaKind::kVllm);
  ASSERT_TRUE(load.ok()) << load.error().message;
  EXPECT_EQ(load->running, 7U);
  EXPECT_EQ(load->waiting, 2U);
  EXPECT_EQ(load->preemptions_total, 7U);
  EXPECT_EQ(load->kv_pages_total, 2000U);
  EXPECT_EQ(load->kv_pages_used, 750U);  // the mean usage over the two engines' 2000 blocks
  EXPECT_EQ(load->tokens_queued_for_prefill, 0U);  // vLLM does not say
}

TEST(EngineLoadTest, OlderVllmUsageNameAndNoBlockCountScaleTheUsage) {
  const std::string page =
      "vllm:num_requests_running{model_name=\"m\"} 1\n"
      "vllm:num_requests_waiting{model_name=\"m\"} 0\r\n"
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.3\n";
  auto load = parse_engine_load(page, ReplicaKind::kVllm);
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->kv_pages_total, kUsageScale);
  EXPECT_EQ(load->kv_pages_used, 3000U);
}

TEST(EngineLoadTest, ReadsSglang) {
  const std::string page =
      "# TYPE sglang:num_running_reqs gauge\n"
      "sglang:num_running_reqs{model_name=\"qwen\",tp_rank=\"0\"} 12.0\n"
      "sglang:num_queue_reqs{model_name=\"qwen\",tp_rank=\"0\"} 5.0\n"
      "sglang:token_usage{model_name=\"qwen\",tp_rank=\"0\"} 0.9\n"
      "sglang:max_total_num_tokens{model_name=\"qwen\",tp_rank=\"0\"} 200000\n";
  auto load = parse_engine_load(page, ReplicaKind::kSglang);
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->running, 12U);
  EXPECT_EQ(load->waiting, 5U);
  EXPECT_EQ(load->kv_pages_total, 200000U);
  EXPECT_EQ(load->kv_pages_used, 180000U);
}

TEST(EngineLoadTest, APageWithoutTheCountsIsAnErrorNotZero) {
  EXPECT_FALSE(parse_engine_load("", ReplicaKind::kVllm).ok());
  EXPECT_FALSE(parse_engine_load("vllm:num_requests_running 1\n", ReplicaKind::kVllm).ok());
  // SGLang's names on a vllm upstream, and garbage values, are not read.
  EXPECT_FALSE(
      parse_engine_load("sglang:num_running_reqs 1\nsglang:num_queue_reqs 1\n", ReplicaKind::kVllm)
          .ok());
  EXPECT_FALSE(parse_engine_load("vllm:num_requests_running{a=\"}\"} x\n"
                                 "vllm:num_requests_waiting 1\n",
                                 ReplicaKind::kVllm)
                   .ok());
  // A label value holding a brace does not confuse the parser.
  auto ok = parse_engine_load(
      "vllm:num_requests_running{a=\"} 9\"} 2\nvllm:num_requests_waiting 1\n", ReplicaKind::kVllm);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->running, 2U);
}

}  // namespace
}  // namespace prefixgate::gateway::server
