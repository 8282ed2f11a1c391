// tenant_limits: and admission: in the YAML configuration: what they set, that admission control
// stays off unless configured, and refusals that name the key.
#include <gtest/gtest.h>

#include "config.h"

namespace prefixgate::gateway {
namespace {

TEST(AdmissionConfigTest, ReadsTenantLimitsAndTheBound) {
  GatewayConfig cfg;
  const auto st = apply_config_yaml(R"(
tenant_limits:
  default: {requests_per_minute: 600, tokens_per_minute: 2000000, max_concurrent: 64}
  team-a: {requests_per_minute: 60}
admission: {max_inflight: 256, max_queue: 512, queue_timeout_ms: 5000, default_max_tokens: 256}
)",
                                    cfg);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const AdmissionConfig& a = cfg.admission;
  EXPECT_TRUE(a.enabled());
  ASSERT_EQ(a.tenant_limits.size(), 2U);
  EXPECT_EQ(a.tenant_limits.at("default").requests_per_minute, 600U);
  EXPECT_EQ(a.tenant_limits.at("default").tokens_per_minute, 2000000U);
  EXPECT_EQ(a.tenant_limits.at("default").max_concurrent, 64U);
  EXPECT_EQ(a.tenant_limits.at("team-a").requests_per_minute, 60U);
  EXPECT_EQ(a.tenant_limits.at("team-a").tokens_per_minute, 0U);  // left out: no limit
  EXPECT_EQ(a.max_inflight, 256U);
  EXPECT_EQ(a.max_queue, 512U);
  EXPECT_EQ(a.queue_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(a.default_max_tokens, 256U);
}

TEST(AdmissionConfigTest, OffUnlessConfigured) {
  GatewayConfig cfg;
  ASSERT_TRUE(apply_config_yaml("policy: round_robin\n", cfg).ok());
  EXPECT_FALSE(cfg.admission.enabled());
  ASSERT_TRUE(apply_config_yaml("admission: {max_queue: 10}\n", cfg).ok());
  EXPECT_FALSE(cfg.admission.enabled());  // a queue without a bound is never used
  ASSERT_TRUE(apply_config_yaml("admission: {max_inflight: 1}\n", cfg).ok());
  EXPECT_TRUE(cfg.admission.enabled());
}

TEST(AdmissionConfigTest, RefusalsNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"tenant_limits: {team-a: {requests_per_minute: 0}}",
       "tenant_limits.team-a.requests_per_minute"},
      {"tenant_limits: {team-a: {tokens_per_minute: -5}}",
       "tenant_limits.team-a.tokens_per_minute"},
      {"tenant_limits: {team-a: {max_concurrent: lots}}", "tenant_limits.team-a.max_concurrent"},
      {"tenant_limits: {default: {rpm: 10}}", "tenant_limits.default.rpm"},
      {"tenant_limits: {default: 10}", "tenant_limits.default"},
      {"tenant_limits: [a, b]", "tenant_limits"},
      {"admission: {max_inflight: -1}", "admission.max_inflight"},
      {"admission: {queue_timeout_ms: 0}", "admission.queue_timeout_ms"},
      {"admission: {max_queued: 3}", "admission.max_queued"},
      {"admission: 5", "admission"},
  };
  for (const auto& [yaml, key] : cases) {
    GatewayConfig cfg;
    const auto st = apply_config_yaml(yaml, cfg);
    ASSERT_FALSE(st.ok()) << yaml;
    EXPECT_EQ(st.error().param, key) << yaml;
    EXPECT_NE(st.error().message.find(key), std::string::npos) << st.error().message;
  }
}

TEST(AdmissionConfigTest, ExampleConfigIsValid) {
  auto cfg = load_config_file(std::string(PREFIXGATE_SOURCE_DIR) + "/examples/tenant-limits.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(validate(*cfg).ok());
  EXPECT_TRUE(cfg->admission.enabled());
  EXPECT_EQ(cfg->admission.tenant_limits.at("batch").requests_per_minute, 0U);
  EXPECT_EQ(cfg->admission.max_inflight, 256U);
}

}  // namespace
}  // namespace prefixgate::gateway
