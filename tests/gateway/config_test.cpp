// Upstream kinds vllm and sglang in the configuration: YAML keys and the --upstream flag form,
// defaults, and refusals that name the key.
#include "config.h"

#include <gtest/gtest.h>

namespace prefixgate::gateway {
namespace {

TEST(ConfigTest, VllmUpstreamFromYaml) {
  GatewayConfig cfg;
  const auto st = apply_config_yaml(R"(
upstreams:
  - url: http://10.0.0.5:8000
    kind: vllm
    kv_events: tcp://10.0.0.5:5557
    kv_events_replay: tcp://10.0.0.5:5558
    data_parallel_size: 2
    load_interval_ms: 500
  - {url: http://10.0.0.6:30000, kind: sglang}
routing: {offload_hit_weight: 0.5, gateways: 3}
)",
                                    cfg);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(cfg.upstreams.size(), 2U);
  const UpstreamConfig& v = cfg.upstreams[0];
  EXPECT_EQ(v.kind, ReplicaKind::kVllm);
  EXPECT_EQ(v.kv_events, "tcp://10.0.0.5:5557");
  EXPECT_EQ(v.kv_events_replay, "tcp://10.0.0.5:5558");
  EXPECT_EQ(v.data_parallel_size, 2U);
  EXPECT_EQ(v.load_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(cfg.upstreams[1].kind, ReplicaKind::kSglang);
  EXPECT_EQ(cfg.upstreams[1].kv_events, "tcp://10.0.0.6:5557");  // vLLM's default port
  EXPECT_EQ(cfg.upstreams[1].load_interval, std::chrono::milliseconds(200));
  EXPECT_DOUBLE_EQ(cfg.routing.offload_hit_weight, 0.5);
  EXPECT_EQ(cfg.routing.gateways, 3U);
  EXPECT_TRUE(validate(cfg).ok());
}

TEST(ConfigTest, UpstreamFlagFormTakesEveryKey) {
  auto up = parse_upstream_spec(
      "http://10.0.0.5:8000;kind=vllm;kv_events=tcp://10.0.0.5:5557;"
      "kv_events_replay=tcp://10.0.0.5:5558;data_parallel_size=4;capacity_blocks=9000");
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->host, "10.0.0.5");
  EXPECT_EQ(up->port, 8000);
  EXPECT_EQ(up->kind, ReplicaKind::kVllm);
  EXPECT_EQ(up->kv_events_replay, "tcp://10.0.0.5:5558");
  EXPECT_EQ(up->data_parallel_size, 4U);
  EXPECT_EQ(up->capacity_blocks, 9000U);
  auto plain = parse_upstream_spec("http://127.0.0.1:9001");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->kind, ReplicaKind::kPrefixgate);
}

TEST(ConfigTest, AnUpstreamsSpeedAndACacheAwareVariant) {
  auto up = parse_upstream_spec(
      "http://10.0.0.5:8000;kind=vllm;prefill_tokens_per_s=4000;decode_us_per_sequence=1100");
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->prefill_tokens_per_s, 4000U);
  EXPECT_EQ(up->decode_us_per_sequence, 1100U);
  GatewayConfig cfg;
  cfg.upstreams.push_back(*up);
  cfg.policy = "cache_aware:memory_aware=false:eviction_weight=0.5";
  EXPECT_TRUE(validate(cfg).ok());
  cfg.policy = "cache_aware:memory_aware=maybe";
  ASSERT_FALSE(validate(cfg).ok());
  EXPECT_EQ(validate(cfg).error().param, "policy");
  cfg.policy = "cache_aware:eviction_weight=-1";
  EXPECT_FALSE(validate(cfg).ok());
}

TEST(ConfigTest, MalformedUpstreamValuesNameTheKey) {
  const auto refuse = [](std::string_view spec, std::string_view param) {
    auto up = parse_upstream_spec(spec, "--upstream");
    ASSERT_FALSE(up.ok()) << spec;
    EXPECT_EQ(up.error().param, param) << up.error().message;
  };
  refuse("http://h:1;kind=tgi", "--upstream.kind");
  refuse("http://h:1;kind=vllm;data_parallel_size=0", "--upstream.data_parallel_size");
  refuse("http://h:1;kind=vllm;data_parallel_size=65", "--upstream.data_parallel_size");
  refuse("http://h:1;kind=vllm;data_parallel_size=two", "--upstream.data_parallel_size");
  refuse("http://h:1;kind=vllm;kv_events=http://h:5557", "--upstream.kv_events");
  refuse("http://h:1;kind=vllm;kv_events=tcp://*:5557", "--upstream.kv_events");
  refuse("http://h:1;kind=vllm;kv_events_replay=tcp://h:65535;data_parallel_size=2",
         "--upstream.kv_events_replay");
  refuse("http://h:1;kind=openai;kv_events=tcp://h:5557", "--upstream.kv_events");
  refuse("http://h:1;kv_events=tcp://h:5557", "--upstream.kv_events");  // kind prefixgate
  refuse("http://h:1;kind=vllm;load_interval_ms=-5", "--upstream.load_interval_ms");
  refuse("http://h:1;kind=vllm;color=blue", "--upstream.color");
  refuse("http://h:1;kind=vllm;prefill_tokens_per_s=0", "--upstream.prefill_tokens_per_s");
  refuse("http://h:1;decode_us_per_sequence=fast", "--upstream.decode_us_per_sequence");
  refuse("http://h:1;kind", "--upstream");
  refuse("ftp://h:1;kind=vllm", "--upstream");

  GatewayConfig cfg;
  auto st = apply_config_yaml("upstreams: [{url: 'http://h:1', kind: vllm, kv_events: [1]}]", cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "upstreams[0].kv_events");
  st = apply_config_yaml("routing: {offload_hit_weight: 2}", cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "routing.offload_hit_weight");
  st = apply_config_yaml("routing: {gateways: 0}", cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "routing.gateways");
}

TEST(ConfigTest, AnUpstreamModelMustBeConfigured) {
  GatewayConfig cfg;
  ASSERT_TRUE(
      apply_config_yaml("upstreams: [{url: 'http://h:1', kind: vllm, model: llama}]", cfg).ok());
  auto st = validate(cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "upstreams[0].model");
  ASSERT_TRUE(apply_config_yaml("models: {llama: {model_id: llama-3}}", cfg).ok());
  EXPECT_TRUE(validate(cfg).ok());
}

TEST(ConfigTest, ExampleConfigsAreValid) {
  for (const char* name : {"vllm-fleet.yaml", "sglang-fleet.yaml", "engine-as-vllm.yaml"}) {
    auto cfg = load_config_file(std::string(PREFIXGATE_SOURCE_DIR) + "/examples/" + name);
    ASSERT_TRUE(cfg.ok()) << name << ": " << cfg.error().message;
    EXPECT_TRUE(validate(*cfg).ok()) << name;
    for (const UpstreamConfig& up : cfg->upstreams) {
      EXPECT_TRUE(has_kv_event_stream(up.kind)) << name;
      EXPECT_FALSE(up.kv_events_replay.empty()) << name;
    }
  }
}

TEST(ConfigTest, TokenizerCacheKeys) {
  GatewayConfig cfg;
  EXPECT_TRUE(cfg.tokenizer_cache.enabled);  // on by default
  auto st = apply_config_yaml(
      "tokenizer_cache: {enabled: false, max_bytes: 1048576, min_segment_bytes: 0}", cfg);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(cfg.tokenizer_cache.enabled);
  EXPECT_EQ(cfg.tokenizer_cache.max_bytes, 1048576U);
  EXPECT_EQ(cfg.tokenizer_cache.min_segment_bytes, 0U);
  st = apply_config_yaml("tokenizer_cache: {max_bytes: 0}", cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "tokenizer_cache.max_bytes");
  st = apply_config_yaml("tokenizer_cache: {size: 1}", cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().param, "tokenizer_cache.size");
}

}  // namespace
}  // namespace prefixgate::gateway

namespace prefixgate::gateway {
namespace {

TEST(ConfigTest, ThePeeredExampleIsValid) {
  auto cfg =
      load_config_file(std::string(PREFIXGATE_SOURCE_DIR) + "/examples/gateways-peered.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(validate(*cfg).ok());
  EXPECT_TRUE(cfg->peers.enabled());
  EXPECT_EQ(cfg->peers.addresses.size(), 2U);
}

TEST(ConfigTest, PeersKeysAndTheirRefusals) {
  GatewayConfig cfg;
  auto st = apply_config_yaml(R"(
upstreams: [http://10.0.0.5:8000]
peers:
  listen: 10.0.0.1:7411
  addresses: [10.0.0.2:7411, "gw-3.internal:7411", "[fd00::4]:7411"]
  flush_ms: 0.25
  timeout_ms: 5000
)",
                              cfg);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(cfg.peers.enabled());
  EXPECT_EQ(cfg.peers.host, "10.0.0.1");
  EXPECT_EQ(cfg.peers.port, 7411);
  EXPECT_EQ(cfg.peers.addresses.size(), 3U);
  EXPECT_EQ(cfg.peers.flush_us, 250U);
  EXPECT_EQ(cfg.peers.timeout_ms, 5000U);
  EXPECT_TRUE(validate(cfg).ok());

  const auto refused = [](const char* yaml) {
    GatewayConfig c;
    c.upstreams.push_back(*parse_upstream_url("http://10.0.0.5:8000"));
    Status s = apply_config_yaml(yaml, c);
    if (s.ok()) s = validate(c);
    return s.ok() ? std::string() : s.error().param;
  };
  EXPECT_EQ(refused("peers: {listen: gw-1:7411, addresses: [10.0.0.2:7411]}"), "peers.listen");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:70000, addresses: [10.0.0.2:7411]}"), "peers.listen");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:7411, addresses: [10.0.0.2:0]}"),
            "peers.addresses[0]");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:7411, addresses: [10.0.0.2]}"), "peers.addresses[0]");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:7411}"), "peers.addresses");
  EXPECT_EQ(refused("peers: {addresses: [10.0.0.2:7411]}"), "peers.listen");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:7411, addresses: [10.0.0.2:7411], flush_ms: 0}"),
            "peers.flush_ms");
  EXPECT_EQ(refused("peers: {listen: 10.0.0.1:7411, addresses: [10.0.0.2:7411], gossip: 1}"),
            "peers.gossip");
  EXPECT_EQ(refused("peers: [10.0.0.2:7411]"), "peers");
}

}  // namespace
}  // namespace prefixgate::gateway
