// GET /stats and /dashboard on a real gateway with two engine replicas: the documented fields
// (gateway/STATS.md) are there with sane values after traffic, agree with /metrics, `since`
// filters samples, bad input gets an OpenAI-shaped error, and the page is served offline-safe.
#include <gtest/gtest.h>

#include <set>

#include "gateway_server/dashboard_traffic.h"
#include "gateway_server/processes.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::gateway::testing {
namespace {

double num(const json::Value& v, std::string_view key) {
  const json::Value* n = v.find(key);
  EXPECT_TRUE(n && n->is_number()) << key << " in " << json::to_json(v).substr(0, 300);
  return n && n->is_number() ? n->as_number().value : -1;
}

const json::Array& arr(const json::Value& v, std::string_view key) {
  static const json::Array empty;
  const json::Value* a = v.find(key);
  EXPECT_TRUE(a && a->is_array()) << key;
  return a && a->is_array() ? a->as_array() : empty;
}

// Sum of a counter family's samples in Prometheus text, over all label sets.
double metric_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = text.find("\n" + name, pos)) != std::string::npos) {
    pos += 1;
    const std::size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    const char next = line.size() > name.size() ? line[name.size()] : ' ';
    if (next != '{' && next != ' ') continue;  // another metric sharing the prefix
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

class StatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_a_ = start_engine(port_a_).release();
    engine_b_ = start_engine(port_b_).release();
    gateway_ = start_gateway(port_, {"--config", write_dashboard_config(), "--upstream",
                                     upstream(port_a_), "--upstream", upstream(port_b_)})
                   .release();
    if (port_ != 0 && wait_healthy(port_, 2)) {
      sent_ = send_dashboard_traffic(port_, 3);
      wait_stats_requests(port_, sent_);
    }
  }
  static void TearDownTestSuite() {
    delete gateway_;
    delete engine_a_;
    delete engine_b_;
  }
  void SetUp() override {
    ASSERT_NE(port_, 0) << gateway_->output();
    ASSERT_EQ(sent_, 9) << gateway_->output();
  }
  static json::Value stats(const std::string& query = {}) {
    const Reply r = get(port_, "/stats" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("content-type"), "application/json");
    auto doc = json::parse(r.body);
    EXPECT_TRUE(doc && doc->is_object()) << r.body.substr(0, 300);
    return doc ? std::move(*doc) : json::Value(json::Object{});
  }
  static inline Process* engine_a_ = nullptr;
  static inline Process* engine_b_ = nullptr;
  static inline Process* gateway_ = nullptr;
  static inline std::uint16_t port_a_ = 0, port_b_ = 0, port_ = 0;
  static inline int sent_ = 0;
};

TEST_F(StatsTest, TopLevelFieldsAndTotalsAfterTraffic) {
  const json::Value s = stats();
  EXPECT_EQ(num(s, "version"), 1);
  EXPECT_EQ(num(s, "interval_ms"), 1000);
  EXPECT_EQ(num(s, "capacity"), 900);
  EXPECT_GE(num(s, "now_ms"), num(s, "started_ms"));
  EXPECT_EQ(s.find("policy")->as_string(), "cache_aware");
  EXPECT_EQ(num(s, "ttft_hit_fraction"), 0.5);
  for (const char* section : {"totals", "window"}) {
    SCOPED_TRACE(section);
    const json::Value& t = *s.find(section);
    EXPECT_EQ(num(t, "requests"), 9);
    EXPECT_EQ(num(t, "errors"), 0);
    EXPECT_GT(num(t, "prompt_tokens"), 9 * 500);
    EXPECT_GT(num(t, "cached_tokens"), 0);
    EXPECT_NEAR(num(t, "hit_rate"), num(t, "cached_tokens") / num(t, "prompt_tokens"), 1e-12);
    EXPECT_GT(num(t, "hit_rate"), 0.2);  // the support and docs prompts repeat
    EXPECT_LE(num(t, "hit_rate"), 1.0);
    EXPECT_GE(num(t, "predicted_hit_rate"), 0.0);
    const json::Value& decisions = *t.find("decisions");
    double routed = 0;
    for (const auto& [reason, n] : decisions.as_object()) routed += n.as_number().value;
    EXPECT_EQ(routed, 9);
    // The support tenant streams and repeats its prompt: hits; shop streams and breaks it.
    const json::Value& ttft = *t.find("ttft_ms");
    EXPECT_GE(num(*ttft.find("hit"), "count"), 1);
    EXPECT_GE(num(*ttft.find("miss"), "count"), 1);
    EXPECT_EQ(num(*ttft.find("hit"), "count") + num(*ttft.find("miss"), "count"), 6);
    EXPECT_GE(num(*ttft.find("hit"), "p99"), num(*ttft.find("hit"), "p50"));
    EXPECT_GE(num(t, "findings"), 3);
    EXPECT_GE(num(t, "canonicalization_changes"), 3);
  }
}

TEST_F(StatsTest, TotalsAgreeWithMetrics) {
  const json::Value s = stats();
  const std::string metrics = get(port_, "/metrics").body;
  EXPECT_EQ(num(*s.find("totals"), "prompt_tokens"),
            metric_sum(metrics, "prefixgate_prompt_tokens_total"));
  EXPECT_EQ(num(*s.find("totals"), "cached_tokens"),
            metric_sum(metrics, "prefixgate_cached_tokens_total"));
  EXPECT_EQ(num(*s.find("totals"), "predicted_cached_tokens"),
            metric_sum(metrics, "prefixgate_predicted_cached_tokens_total"));
  EXPECT_EQ(metric_sum(metrics, "prefixgate_time_to_first_token_by_cache_seconds_count"), 6);
  for (const char* gauge :
       {"prefixgate_upstream_running_sequences", "prefixgate_upstream_waiting_sequences",
        "prefixgate_upstream_kv_usage_ratio", "prefixgate_upstream_preemptions"}) {
    EXPECT_NE(metrics.find(std::string("\n") + gauge + "{replica="), std::string::npos) << gauge;
  }
}

TEST_F(StatsTest, ReplicasCarryHealthLoadAndHitRates) {
  const json::Value s = stats();
  const json::Array& replicas = arr(s, "replicas");
  ASSERT_EQ(replicas.size(), 2u);
  double requests = 0;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    const json::Value& r = replicas[i];
    EXPECT_EQ(num(r, "id"), static_cast<double>(i));
    EXPECT_EQ(r.find("name")->as_string(), upstream(i == 0 ? port_a_ : port_b_));
    EXPECT_TRUE(r.find("healthy")->as_bool());
    EXPECT_GT(num(r, "kv_pages_total"), 0);
    EXPECT_GE(num(r, "kv_pages_used"), 0);
    EXPECT_NEAR(num(r, "kv_usage"), num(r, "kv_pages_used") / num(r, "kv_pages_total"), 1e-12);
    EXPECT_EQ(num(r, "preemptions_total"), 0);
    for (const char* k : {"running", "waiting", "tokens_queued_for_prefill", "inflight_requests",
                          "index_blocks", "seconds_since_event"}) {
      EXPECT_GE(num(r, k), 0) << k;
    }
    requests += num(*r.find("totals"), "requests");
    EXPECT_GE(num(*r.find("window"), "requests"), 0);
  }
  EXPECT_EQ(requests, 9);
}

TEST_F(StatsTest, TenantsFindingsAndCanonicalization) {
  const json::Value s = stats();
  std::set<std::string> names;
  for (const json::Value& t : arr(s, "tenants")) {
    names.insert(t.find("name")->as_string());
    EXPECT_EQ(num(*t.find("totals"), "requests"), 3);
  }
  EXPECT_EQ(names, (std::set<std::string>{"support", "shop", "docs"}));

  const json::Array& findings = arr(s, "findings");
  ASSERT_FALSE(findings.empty());
  const json::Value& f = findings[0];
  EXPECT_EQ(f.find("rule")->as_string(), "volatile-timestamp");
  EXPECT_EQ(f.find("field")->as_string(), "messages[0].content");
  EXPECT_EQ(num(f, "count"), 3);
  const std::string& excerpt = f.find("excerpt")->as_string();
  EXPECT_FALSE(excerpt.empty());
  EXPECT_EQ(excerpt.find_first_of("012345678"), std::string::npos) << excerpt;  // digits show as 9
  EXPECT_GT(num(f, "token_offset"), 0);
  EXPECT_GE(num(f, "last_seen_ms"), num(f, "first_seen_ms"));

  bool tool_json = false;
  for (const json::Value& c : arr(s, "canonicalization")) {
    if (c.find("rule")->as_string() == "tool-json") {
      tool_json = true;
      EXPECT_EQ(c.find("mode")->as_string(), "rewrite");
      EXPECT_EQ(num(c, "count"), 3);
    }
  }
  EXPECT_TRUE(tool_json) << json::to_json(s.find("canonicalization") ? *s.find("canonicalization")
                                                                     : json::Value());
}

TEST_F(StatsTest, SamplesAreOrderedAndSinceFiltersThem) {
  const json::Value s = stats();
  const json::Array& samples = arr(s, "samples");
  ASSERT_GE(samples.size(), 1u);
  double prev = 0, requests = 0;
  for (const json::Value& x : samples) {
    EXPECT_GT(num(x, "t"), prev);
    prev = num(x, "t");
    requests += num(x, "requests");
    EXPECT_EQ(arr(x, "replicas").size(), 2u);
    EXPECT_NE(x.find("ttft_ms"), nullptr);
    EXPECT_NE(x.find("decisions"), nullptr);
  }
  EXPECT_EQ(requests, 9);  // the ring holds every sample since start
  EXPECT_EQ(num(samples.back(), "t"), num(s, "now_ms"));

  const json::Value later = stats("?since=" + json::format_number(num(s, "now_ms")));
  for (const json::Value& x : arr(later, "samples")) EXPECT_GT(num(x, "t"), num(s, "now_ms"));
  EXPECT_LE(arr(later, "samples").size(), 3u);
}

TEST_F(StatsTest, BadQueryAndMethodGetOpenAiErrors) {
  for (const char* q : {"?since=abc", "?since=-5", "?since=12x"}) {
    const Reply r = get(port_, std::string("/stats") + q);
    EXPECT_EQ(r.status, 400) << q;
    auto doc = json::parse(r.body);
    ASSERT_TRUE(doc) << r.body;
    EXPECT_NE(doc->find("error"), nullptr);
  }
  EXPECT_EQ(post(port_, "/stats", "{}").status, 405);
  EXPECT_EQ(post(port_, "/dashboard", "{}").status, 405);
}

TEST_F(StatsTest, DashboardIsServedSelfContained) {
  const Reply r = get(port_, "/dashboard");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.header("content-security-policy").find("default-src 'none'"), std::string::npos);
  EXPECT_NE(r.body.find("/stats"), std::string::npos);
  EXPECT_NE(r.body.find("</html>"), std::string::npos);
  for (const char* external : {"src=\"http", "href=\"http", "url(http", "//cdn", "@import"}) {
    EXPECT_EQ(r.body.find(external), std::string::npos) << external;
  }
  const Reply root = get(port_, "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.header("location"), "/dashboard");
}

}  // namespace
}  // namespace prefixgate::gateway::testing
