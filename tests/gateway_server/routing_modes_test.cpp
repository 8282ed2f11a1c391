// Routing modes, for real: `openai`-kind upstreams (predictions only), isolated tenants,
// consistent_hash session keys, and observe-mode canonicalization findings.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

std::string system_prompt(const std::string& who) {
  std::string s = "You are the assistant of " + who + ". ";
  for (int i = 0; i < 10; ++i) {
    s += "Guideline " + std::to_string(i) + " for " + who + ": be exact and cite sources. ";
  }
  return s;
}

std::size_t usage_number(const std::string& body, bool cached) {
  auto doc = json::parse(body);
  const json::Value* usage = doc ? doc->find("usage") : nullptr;
  if (!usage) return 0;
  const json::Value* n = usage->find("prompt_tokens");
  if (cached) {
    const json::Value* d = usage->find("prompt_tokens_details");
    n = d ? d->find("cached_tokens") : nullptr;
  }
  return n && n->is_number() ? static_cast<std::size_t>(n->as_number().value) : 0;
}

// An `upstreams:` YAML block.
std::string upstreams_yaml(std::initializer_list<std::uint16_t> ports, const std::string& kind) {
  std::string out = "upstreams:\n";
  for (std::uint16_t p : ports) out += "  - url: " + upstream(p) + "\n    kind: " + kind + "\n";
  return out;
}

TEST(GatewayRoutingModesTest, OpenAiKindUpstreamsConvergeOnPredictionsAlone) {
  std::uint16_t pa = 0, pb = 0, pc = 0, port = 0;
  auto a = start_engine(pa);
  auto b = start_engine(pb);
  auto c = start_engine(pc);
  ASSERT_TRUE(pa && pb && pc);
  const std::string config =
      write_config("openai-kind", "policy: cache_aware\n" + upstreams_yaml({pa, pb, pc}, "openai"));
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 3));

  std::size_t prompt = 0, cached = 0;
  std::set<std::string> used;
  for (int group = 0; group < 3; ++group) {
    std::set<std::string> replicas;
    for (int i = 0; i < 5; ++i) {
      const Reply r = post(port, "/v1/chat/completions",
                           system_user_chat(system_prompt("team " + std::to_string(group)),
                                            "Question " + std::to_string(i)));
      ASSERT_EQ(r.status, 200) << r.body;
      replicas.insert(r.header("x-prefixgate-replica"));
      if (i > 0) {
        EXPECT_GT(std::stoul(r.header("x-prefixgate-predicted-cached-tokens")), 0u);
        prompt += usage_number(r.body, false);
        cached += usage_number(r.body, true);
      }
    }
    EXPECT_EQ(replicas.size(), 1u) << "group " << group;
    used.insert(replicas.begin(), replicas.end());
  }
  // The predictions were right: the engines did hold the prefixes.
  EXPECT_GT(static_cast<double>(cached), 0.6 * static_cast<double>(prompt));

  // openai upstreams: no kv_events subscription, predictions that outlive the 2 s TTL of
  // prefixgate upstreams (they are the only source), and /metrics shows the replicas.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the prediction TTL
  const Reply again = post(port, "/v1/chat/completions",
                           system_user_chat(system_prompt("team 0"), "One more question"));
  ASSERT_EQ(again.status, 200);
  EXPECT_GT(std::stoul(again.header("x-prefixgate-predicted-cached-tokens")), 0u);
  EXPECT_EQ(again.header("x-prefixgate-route-reason"), "cache_hit");

  const Reply metrics = get(port, "/metrics");
  EXPECT_EQ(metrics.body.find("prefixgate_kv_events_total{"), std::string::npos);
  double blocks = 0;
  for (std::uint16_t p : {pa, pb, pc}) {
    const std::string r = "{replica=\"" + upstream(p) + "\"}";
    EXPECT_EQ(metric_value(metrics.body, "prefixgate_upstream_healthy" + r), 1.0) << r;
    blocks += std::max(0.0, metric_value(metrics.body, "prefixgate_index_blocks" + r));
  }
  EXPECT_GT(blocks, 0);
  EXPECT_NE(metrics.body.find("prefixgate_routing_decisions_total{policy=\"cache_aware\","
                              "reason=\"cache_hit\"}"),
            std::string::npos);
}

TEST(GatewayRoutingModesTest, IsolatedTenantsNeverSeeEachOthersCachedTokens) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);  // one replica: both tenants land on the same cache
  ASSERT_NE(pe, 0);
  const std::string config =
      write_config("tenants", upstreams_yaml({pe}, "prefixgate") +
                                  "tenant_header: x-tenant\nisolate_header_tenants: true\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  const std::string body = system_user_chat(system_prompt("a shared product"), "Same question");
  const auto send = [&](const std::string& tenant) {
    const Reply r = post(port, "/v1/chat/completions", body, {{"x-tenant", tenant}});
    EXPECT_EQ(r.status, 200) << r.body;
    return usage_number(r.body, true);
  };
  EXPECT_EQ(send("alpha"), 0u);
  EXPECT_GT(send("alpha"), 0u) << "the same tenant hits its own cache";
  EXPECT_EQ(send("beta"), 0u) << "another tenant hit alpha's cache";
  EXPECT_GT(send("beta"), 0u);
  EXPECT_EQ(send("gamma"), 0u);
  // Untenanted requests are not isolated, and share nothing with the tenants either.
  EXPECT_EQ(usage_number(post(port, "/v1/chat/completions", body).body, true), 0u);

  const Reply metrics = get(port, "/metrics");
  const std::string series = "{replica=\"" + upstream(pe) + "\",tenant=\"alpha\"}";
  EXPECT_GT(metric_value(metrics.body, "prefixgate_cached_tokens_total" + series), 0)
      << metrics.body;
}

TEST(GatewayRoutingModesTest, ConsistentHashKeysOnTheSessionHeaderThenUserThenApiKey) {
  std::uint16_t pa = 0, pb = 0, pc = 0, port = 0;
  auto a = start_engine(pa);
  auto b = start_engine(pb);
  auto c = start_engine(pc);
  ASSERT_TRUE(pa && pb && pc);
  std::string keys = "api_keys: [";
  for (int i = 0; i < 12; ++i) keys += (i ? ", " : "") + std::string("sk-") + std::to_string(i);
  const std::string config = write_config(
      "consistent-hash",
      "policy: consistent_hash\n" + upstreams_yaml({pa, pb, pc}, "prefixgate") + keys + "]\n");
  auto gw = start_gateway(port, {"--config", config});
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 3));

  const auto replica = [&](int key, const std::string& user, const std::string& session,
                           int prompt) {
    std::map<std::string, std::string> headers{
        {"authorization", "Bearer sk-" + std::to_string(key)}};
    if (!session.empty()) headers["x-prefixgate-session"] = session;
    const std::string extra = user.empty() ? "" : "\"user\":\"" + user + "\"";
    const Reply r =
        post(port, "/v1/chat/completions",
             system_user_chat("Prompt " + std::to_string(prompt), "Hi", extra), headers);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.header("x-prefixgate-replica");
  };
  // The header wins over user and key.
  std::set<std::string> by_header;
  for (int i = 0; i < 12; ++i) by_header.insert(replica(i, "user-" + std::to_string(i), "s1", i));
  EXPECT_EQ(by_header.size(), 1u);
  // Without the header, the body's `user` wins over the key.
  std::set<std::string> by_user;
  for (int i = 0; i < 12; ++i) by_user.insert(replica(i, "alice", "", i));
  EXPECT_EQ(by_user.size(), 1u);
  // Without either, the API key.
  std::set<std::string> by_key;
  for (int i = 0; i < 6; ++i) by_key.insert(replica(7, "", "", i));
  EXPECT_EQ(by_key.size(), 1u);
  // And each of them is a real key: different values spread over the replicas.
  std::set<std::string> users, sessions, api_keys;
  for (int i = 0; i < 12; ++i) {
    users.insert(replica(0, "user-" + std::to_string(i), "", 0));
    sessions.insert(replica(0, "", "session-" + std::to_string(i), 0));
    api_keys.insert(replica(i, "", "", 0));
  }
  EXPECT_GE(users.size(), 2u);
  EXPECT_GE(sessions.size(), 2u);
  EXPECT_GE(api_keys.size(), 2u);
}

TEST(GatewayRoutingModesTest, ObservedFindingsAreCountedAndSampledToTheLog) {
  std::uint16_t pe = 0, port = 0;
  auto engine = start_engine(pe);
  ASSERT_NE(pe, 0);
  const std::string config =
      write_config("observe", upstreams_yaml({pe}, "prefixgate") +
                                  "canonicalization: {timestamp: observe, log_samples_per_s: 2}\n");
  auto gw = start_gateway(port, {"--config", config}, "info");
  ASSERT_NE(port, 0) << gw->output();
  ASSERT_TRUE(wait_healthy(port, 1));

  const std::string secret = "2031-07-19T14:53:27Z";
  const std::string body =
      system_user_chat("Current time: " + secret + ". You are a helpful assistant.", "Hi");
  const auto start = std::chrono::steady_clock::now();
  constexpr int kRequests = 30;
  for (int i = 0; i < kRequests; ++i) {
    const Reply r = post(port, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const Reply metrics = get(port, "/metrics");
  EXPECT_EQ(metric_value(
                metrics.body,
                "prefixgate_canonicalization_changes_total{rule=\"timestamp\",mode=\"observe\"}"),
            kRequests)
      << metrics.body;
  EXPECT_NE(metrics.body.find("prefixgate_prompt_findings_total{rule="), std::string::npos);

  // Sampled: at least one line, at most 2 per started second (per kind of line), each naming
  // the rule and the path, and none with the prompt's text.
  std::smatch m;
  gw->read_until(std::regex("rule timestamp path messages"), m, std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the last lines arrive
  gw->read_until(std::regex("\\$never\\$"), m, std::chrono::milliseconds(300));
  const std::string& log = gw->output();
  std::size_t observed = 0, findings = 0;
  for (std::size_t at = 0; (at = log.find("canonicalization finding (observe)", at)) != log.npos;
       ++at) {
    ++observed;
  }
  for (std::size_t at = 0; (at = log.find("prompt finding:", at)) != log.npos; ++at) ++findings;
  EXPECT_GE(observed + findings, 1u) << log;
  EXPECT_LT(observed + findings, static_cast<std::size_t>(kRequests)) << log;
  EXPECT_LE(observed + findings, static_cast<std::size_t>(2 * (elapsed_s + 2))) << log;
  EXPECT_NE(log.find("rule timestamp path messages[0]"), std::string::npos) << log;
  EXPECT_EQ(log.find(secret), std::string::npos) << "the log copied prompt text";
  EXPECT_EQ(log.find("14:53:27"), std::string::npos) << log;
}

}  // namespace
}  // namespace prefixgate::gateway::testing
